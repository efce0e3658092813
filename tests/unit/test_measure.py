"""Measurements from real log formats, and threshold verdicts over them.

The log excerpts follow `argo-hera-trainer.md` §5 and nccl-tests' `src/util.cu` (header, row and footer
formats) and Megatron-LM's `training_log`; every expected number below is worked out by hand from them.
"""

from __future__ import annotations

from typing import Any

import pytest

from nvcre_argo.catalog.model import MEASURED_THRESHOLD_KEYS
from nvcre_argo.measure.megatron import MegatronResult, parse_megatron_log, parse_training_line
from nvcre_argo.measure.nccl import NcclRank, NcclTiming, data_check_failure, parse_nccl_log
from nvcre_argo.measure.thresholds import evaluate_thresholds, measured_values

# Two nodes x 2 GPUs (busbw = algbw x 2(n-1)/n = 1.5 x algbw), NCCL_DEBUG=INFO lines interleaved, one time in
# exponent form, and the launcher's `mpirun --tag-output` prefix on one row.
ALL_REDUCE_LOG = """\
# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid    101 on cert-g0-node-0-0 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid    102 on cert-g0-node-0-0 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid    201 on cert-g0-node-0-1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid    202 on cert-g0-node-0-1 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
cert-g0-node-0-0:101:101 [0] NCCL INFO Bootstrap : Using eth0:127.3.0.5<0>
cert-g0-node-0-0:101:101 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    36.26    0.00    0.00      0    35.77    0.00    0.00      0
cert-g0-node-0-1:201:215 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM
     1048576        262144     float     sum      -1    61.93   16.93   25.40      0    60.12   17.44   26.16      0
[1,0]<stdout>:  8589934592    2147483648     float     sum      -1  3.7e+04  230.53  345.80      0    37240  230.66 \
 345.99      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 123.854
#
# Collective test concluded: all_reduce_perf
"""

# `-c 0` (no data check): the #wrong columns read N/A.
NO_CHECK_LOG = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
     1048576        262144     float     sum      -1    61.93   16.93   25.40    N/A    60.12   17.44   26.16    N/A
# Avg bus bandwidth    : 25.78
"""

# `-I 1` adds per-iteration columns after each half; a data check found wrong elements in both halves.
PER_ITERATION_LOG = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong    i_min    i_max    i_p99 \
   i_cv%     time   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%
     1048576        262144     float     sum      -1    61.93   16.93   25.40      3    60.00    64.00    63.50 \
    1.20    60.12   17.44   26.16      1    59.00    62.00    61.90     1.10
# Out of bounds values : 4 FAILED
"""

# Megatron-LM, log interval 10, 50 iterations; NCCL and torchrun noise in between.
MEGATRON_LOG = """\
[default0]:NCCL version 2.27.3+cuda12.9
 [2026-01-12 10:00:00.000000] iteration       10/      50 | consumed samples:          640 | \
elapsed time per iteration (ms): 5000.0 | throughput per GPU (TFLOP/s/GPU): 150.0 | learning rate: 2.999940E-04 | \
global batch size:    64 | lm loss: 1.150000E+01 | loss scale: 1.0 | grad norm: 8.123 | \
number of skipped iterations:   0 | number of nan iterations:   0 |
node-1:55:55 [3] NCCL INFO comm 0x5f1 rank 3 nranks 16 - Init COMPLETE
 [2026-01-12 10:00:21.000000] iteration       20/      50 | consumed samples:         1280 | \
elapsed time per iteration (ms): 2000.0 | throughput per GPU (TFLOP/s/GPU): 400.0 | learning rate: 2.9E-04 | \
global batch size:    64 | lm loss: 9.870000E+00 | loss scale: 1.0 | grad norm: 3.210 |
 [2026-01-12 10:00:42.000000] iteration       30/      50 | consumed samples:         1920 | \
elapsed time per iteration (ms): 2000.0 | throughput per GPU (TFLOP/s/GPU): 400.0 | learning rate: 2.7E-04 |
 [2026-01-12 10:01:02.000000] iteration       40/      50 | consumed samples:         2560 | \
elapsed time per iteration (ms): 1800.0 | throughput per GPU (TFLOP/s/GPU): 444.0 | learning rate: 2.5E-04 |
 [2026-01-12 10:01:20.000000] iteration       50/      50 | consumed samples:         3200 | \
elapsed time per iteration (ms): 1800.0 | throughput per GPU (TFLOP/s/GPU): 444.0 | learning rate: 2.3E-04 |
[after training is done] datetime: 2026-01-12 10:01:21
"""


# --- nccl-tests ----------------------------------------------------------------------------------------------


def test_nccl_rows_are_parsed_per_message_size_skipping_interleaved_info_lines() -> None:
    result = parse_nccl_log(ALL_REDUCE_LOG)
    assert [row.size_bytes for row in result.rows] == [8, 1048576, 8589934592]
    assert [row.count for row in result.rows] == [2, 262144, 2147483648]
    assert result.rows[1].data_type == "float"
    assert result.rows[1].out_of_place == NcclTiming(61.93, 16.93, 25.40, 0)
    assert result.rows[1].in_place == NcclTiming(60.12, 17.44, 26.16, 0)


def test_nccl_exponent_form_numbers_parse_as_floats() -> None:
    assert parse_nccl_log(ALL_REDUCE_LOG).rows[2].out_of_place.time_us == 37000.0


def test_nccl_bandwidth_is_the_peak_over_sizes_and_both_placements() -> None:
    result = parse_nccl_log(ALL_REDUCE_LOG)
    assert result.bus_bandwidth_gbps == 345.99  # in-place beats out-of-place's 345.80 at 8 GiB
    assert result.alg_bandwidth_gbps == 230.66
    assert result.avg_bus_bandwidth_gbps == 123.854  # the footer's mean over sizes, kept but not the headline
    assert result.out_of_bounds == 0
    assert result.wrong_results == 0


def test_nccl_rank_lines_map_ranks_to_hosts() -> None:
    result = parse_nccl_log(ALL_REDUCE_LOG)
    assert result.ranks[2] == NcclRank(2, "cert-g0-node-0-1", 0)
    assert result.hosts == ("cert-g0-node-0-0", "cert-g0-node-0-1")


def test_nccl_wrong_columns_reading_n_a_are_none_and_count_as_zero() -> None:
    result = parse_nccl_log(NO_CHECK_LOG)
    assert result.rows[0].out_of_place.wrong is None
    assert result.rows[0].in_place == NcclTiming(60.12, 17.44, 26.16, None)
    assert result.wrong_results == 0
    assert result.avg_bus_bandwidth_gbps == 25.78


def test_nccl_columns_are_located_from_the_header_with_per_iteration_statistics() -> None:
    result = parse_nccl_log(PER_ITERATION_LOG)
    assert result.rows[0].out_of_place == NcclTiming(61.93, 16.93, 25.40, 3)
    assert result.rows[0].in_place == NcclTiming(60.12, 17.44, 26.16, 1)
    assert result.wrong_results == 4
    assert result.out_of_bounds == 4


def test_a_log_without_results_has_no_bandwidth() -> None:
    result = parse_nccl_log("NCCL WARN NET/IB : no device found\nmpirun noticed that process rank 0 exited\n")
    assert (result.rows, result.bus_bandwidth_gbps, result.alg_bandwidth_gbps) == ((), None, None)
    assert result.avg_bus_bandwidth_gbps is None


def test_a_truncated_nccl_row_is_skipped() -> None:
    text = NO_CHECK_LOG + "  2097152        524288     float     sum      -1    70.01   29.9\n"
    assert [row.size_bytes for row in parse_nccl_log(text).rows] == [1048576]


# --- Megatron-LM ---------------------------------------------------------------------------------------------


def test_megatron_training_lines_become_per_interval_records() -> None:
    result = parse_megatron_log(MEGATRON_LOG)
    assert [record.iteration for record in result.records] == [10, 20, 30, 40, 50]
    first = result.records[0]
    assert (first.train_iters, first.elapsed_ms, first.tflops_per_gpu) == (50, 5000.0, 150.0)
    assert first.timestamp is not None
    assert first.timestamp.isoformat() == "2026-01-12T10:00:00"


def test_megatron_summary_excludes_the_warm_up_interval() -> None:
    result = parse_megatron_log(MEGATRON_LOG)
    # Steady intervals: 10 iterations each at 2.0, 2.0, 1.8, 1.8 s -> 76 s over 40 iterations.
    assert result.avg_step_time_sec == pytest.approx(1.9)
    # Time-weighted: (400 x 20 + 400 x 20 + 444 x 18 + 444 x 18) / 76.
    assert result.avg_tflops_per_gpu == pytest.approx(31984 / 76)
    # 76 s of steady training over the 80 s between the first (10:00:00) and the last (10:01:20) line.
    assert result.goodput_ratio == pytest.approx(0.95)


def test_megatron_timestamps_without_microseconds_and_amd_compute_label_parse() -> None:
    line = (
        " [2026-01-12 10:00:00] iteration      100/    1000 | consumed samples: 6400 | "
        "elapsed time per iteration (ms): 1234.5 | compute per GPU (TFLOP/s/GPU): 410.5 (avg 405.2) |"
    )
    record = parse_training_line(line)
    assert record is not None
    assert (record.iteration, record.elapsed_ms, record.tflops_per_gpu) == (100, 1234.5, 410.5)
    assert record.timestamp is not None
    assert record.timestamp.second == 0


def test_megatron_without_throughput_or_timestamps_leaves_those_values_unmeasured() -> None:
    lines = [
        f" iteration {i:8d}/      30 | elapsed time per iteration (ms): {ms} | learning rate: 1.0E-04 |"
        for i, ms in ((10, 900.0), (20, 500.0), (30, 700.0))
    ]
    result = parse_megatron_log("\n".join(lines))
    assert result.avg_step_time_sec == pytest.approx(0.6)
    assert result.avg_tflops_per_gpu is None
    assert result.goodput_ratio is None


def test_megatron_with_only_the_warm_up_interval_has_no_summary() -> None:
    result = parse_megatron_log(MEGATRON_LOG.split("node-1:", maxsplit=1)[0])
    assert len(result.records) == 1
    assert (result.avg_step_time_sec, result.avg_tflops_per_gpu, result.goodput_ratio) == (None, None, None)


def test_megatron_restart_makes_its_first_interval_warm_up_again() -> None:
    # Iterations 10-40, then a restart from the checkpoint at 20 logs 30 and 40 again.
    lines = [
        f" iteration {i:8d}/      50 | elapsed time per iteration (ms): {ms} |"
        for i, ms in ((10, 9000.0), (20, 1000.0), (30, 1000.0), (40, 1000.0), (30, 8000.0), (40, 2000.0))
    ]
    result = parse_megatron_log("\n".join(lines))
    # Steady: 20, 30, 40 at 1.0 s and 40 (after the restart) at 2.0 s, 10 iterations each: 50 s / 40.
    # The 9 s warm-up and the 8 s interval right after the restart are excluded.
    assert result.avg_step_time_sec == pytest.approx(1.25)


def test_non_training_lines_are_not_records() -> None:
    assert parse_training_line(" validation loss at iteration 50 | lm loss value: 9.8 |") is None
    assert parse_training_line("[after training is done] datetime: 2026-01-12 10:01:21") is None
    assert parse_megatron_log("") == MegatronResult(())


# --- thresholds ----------------------------------------------------------------------------------------------


def test_measured_values_use_the_threshold_registry_keys() -> None:
    values = measured_values(nccl=parse_nccl_log(ALL_REDUCE_LOG), megatron=parse_megatron_log(MEGATRON_LOG))
    assert values == pytest.approx(
        {
            "algBandwidthGBps": 230.66,
            "busBandwidthGBps": 345.99,
            "avgStepTimeSec": 1.9,
            "avgTFLOPsPerGPU": 31984 / 76,
            "goodputRatio": 0.95,
        }
    )


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        pytest.param("nccl-bandwidth", lambda: measured_values(nccl=parse_nccl_log(ALL_REDUCE_LOG)), id="nccl"),
        pytest.param(
            "megatron-goodput", lambda: measured_values(megatron=parse_megatron_log(MEGATRON_LOG)), id="megatron"
        ),
    ],
)
def test_each_measurement_gives_exactly_the_threshold_keys_the_resolver_lets_it_check(kind: str, values: Any) -> None:
    # The resolver drops (or refuses) thresholds outside MEASURED_THRESHOLD_KEYS[kind]; a key the parser gives
    # but the table lacks would be dropped for nothing, a key the table has but the parser lacks always "missing".
    assert tuple(sorted(values())) == tuple(sorted(MEASURED_THRESHOLD_KEYS[kind]))


def test_a_clean_data_check_or_none_at_all_is_no_data_check_failure() -> None:
    assert data_check_failure(ALL_REDUCE_LOG) is None
    assert data_check_failure(NO_CHECK_LOG) is None  # -c 0: the check did not run, nothing is proven wrong
    assert data_check_failure("") is None


def test_wrong_values_in_the_data_check_are_a_failure_counting_them() -> None:
    # PER_ITERATION_LOG: 3 wrong out-of-place + 1 in-place, and the footer's 4 out-of-bounds values.
    assert data_check_failure(PER_ITERATION_LOG) == (
        "nccl-tests counted 4 wrong values in its data check (#wrong): the collective corrupted data"
    )


def test_the_out_of_bounds_footer_alone_is_a_data_check_failure() -> None:
    # A log whose rows were cut (kubelet rotation) but whose footer survived still proves the corruption.
    footer_only = "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 123.854\n"
    assert data_check_failure(footer_only) == (
        "nccl-tests counted 2 wrong values in its data check (#wrong): the collective corrupted data"
    )


def test_values_a_log_does_not_give_are_absent_not_zero() -> None:
    assert measured_values(nccl=parse_nccl_log("")) == {}


def test_thresholds_that_hold_report_nothing() -> None:
    values = {"busBandwidthGBps": 345.99, "goodputRatio": 0.95}
    assert evaluate_thresholds({"busBandwidthGBps": "value >= 300", "goodputRatio": "value > 0.9"}, values) == []


def test_a_violated_threshold_reports_the_measured_value_and_the_expression() -> None:
    violations = evaluate_thresholds({"busBandwidthGBps": "value >= 400"}, {"busBandwidthGBps": 345.99})
    assert [(item.key, item.kind, item.value) for item in violations] == [("busBandwidthGBps", "violated", 345.99)]
    assert violations[0].message == 'Threshold "busBandwidthGBps" violated: measured 345.9900, expression: value >= 400'


def test_a_threshold_without_a_measurement_is_reported_missing_never_passed() -> None:
    violations = evaluate_thresholds({"goodputRatio": "value >= 0.9"}, {"busBandwidthGBps": 345.99})
    assert [(item.key, item.kind, item.message) for item in violations] == [
        ("goodputRatio", "missing", 'missing measurement for threshold "goodputRatio"')
    ]


def test_threshold_verdicts_come_in_key_order() -> None:
    thresholds = {"goodputRatio": "value >= 0.99", "avgStepTimeSec": "value < 1.0", "busBandwidthGBps": "value > 1.0"}
    violations = evaluate_thresholds(thresholds, {"avgStepTimeSec": 1.9, "goodputRatio": 0.95})
    assert [(item.key, item.kind) for item in violations] == [
        ("avgStepTimeSec", "violated"),
        ("busBandwidthGBps", "missing"),
        ("goodputRatio", "violated"),
    ]


def test_a_threshold_that_fails_to_evaluate_is_its_own_kind() -> None:
    violations = evaluate_thresholds({"goodputRatio": "value / 0 > 1"}, {"goodputRatio": 0.5})
    assert [(item.kind, item.message.startswith('Threshold "goodputRatio": ')) for item in violations] == [
        ("invalid", True)
    ]
