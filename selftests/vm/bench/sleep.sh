#!/bin/bash
# vmrun bench self-test: a script that runs over the time limit.
echo "sleeping"
sleep 1000
