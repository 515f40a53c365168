"""GPU ECC counters from the NVIDIA driver (nvidia-smi's CSV), read off the scrape's path."""

from __future__ import annotations

import threading

from fuzzball_plugins.devices.nvidia_ecc import EccCounters, parse

#: nvidia-smi --query-gpu=index,ecc...volatile.total --format=csv,noheader,nounits on a node
#: with two GPUs with ECC and one without
SMI = "0, 12, 0\n1, 0, 3\n2, [N/A], [N/A]\n"


def test_each_gpu_reports_its_corrected_and_uncorrected_counts() -> None:
    assert parse(SMI) == {
        'fuzzball_node_gpu_ecc_errors_total{gpu="0",type="corrected"}': 12.0,
        'fuzzball_node_gpu_ecc_errors_total{gpu="0",type="uncorrected"}': 0.0,
        'fuzzball_node_gpu_ecc_errors_total{gpu="1",type="corrected"}': 0.0,
        'fuzzball_node_gpu_ecc_errors_total{gpu="1",type="uncorrected"}': 3.0,
    }


def test_a_node_without_nvidia_smi_reports_nothing() -> None:
    counters = EccCounters()
    counters._read = None  # as on a node without the driver's tools
    assert counters.samples() == {}


def test_the_scrape_gets_the_last_reading_while_the_next_is_read_in_the_background() -> None:
    now = [0.0]
    release = threading.Event()
    answers = iter([SMI, "0, 12, 5\n"])

    def read() -> str:
        release.wait(10)
        return next(answers)

    counters = EccCounters(read, max_age=30, clock=lambda: now[0])
    assert counters.samples() == {}  # the first reading is under way: nothing yet, no wait
    release.set()
    reading = counters._reading
    if reading is not None:
        reading.join(10)
    assert counters.samples()['fuzzball_node_gpu_ecc_errors_total{gpu="1",type="uncorrected"}'] == 3
    now[0] = 31.0  # the reading is old: the next scrape starts another
    counters.samples()
    reading = counters._reading
    if reading is not None:
        reading.join(10)
    assert counters.samples()['fuzzball_node_gpu_ecc_errors_total{gpu="0",type="uncorrected"}'] == 5
