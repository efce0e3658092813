"""Measurements from workload logs, and the threshold verdicts over them.

    nccl        nccl-tests result tables (`all_reduce_perf` and friends): bandwidth per message size
    megatron    Megatron-LM `training_log` lines: step time, TFLOP/s per GPU, goodput
    thresholds  the registry keys (`busBandwidthGBps`, ...) and CEL threshold evaluation

Parsers take the log text as read from the pod (rank 0 / the launcher prints the results) and never fail
on noise: NCCL INFO lines, banners and partial lines are skipped, so a result is whatever the log proves.
A value the log does not contain is None, and a threshold over it is reported as missing, never passed.
"""
