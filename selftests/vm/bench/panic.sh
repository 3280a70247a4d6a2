#!/bin/bash
# vmrun bench self-test: a kernel crash (sysrq-c) ends the VM (panic=-1 and
# -no-reboot) and vmrun reports it.
echo c >/proc/sysrq-trigger
sleep 60
