#!/bin/bash
# vmrun bench self-test: vmrun must return the script's exit status.
echo "exiting with 3"
exit 3
