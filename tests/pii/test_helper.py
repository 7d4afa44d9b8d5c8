"""The masking helper process: the parts of a large batch after the first, detected in another
process, the same detections as in one, and nothing lost when the helper is missing, slow to load
or killed."""

import os
import signal
import time
from functools import partial

import pytest

from memory_service.pii import MaskingPolicy
from memory_service.pii import helper as helper_module
from memory_service.pii.helper import (
    MIN_CHARACTERS,
    PART_SHARES,
    MaskingHelper,
    part_ranges,
    shared_helper,
    spare_core,
)

NOTES = [
    "Per Maria Gonzalez, the pgbouncer pool stays at 20 connections (note {n}); mail maria.g@example.com.",
    "Priya Raman said the canary must run for an hour before the rollout of build {n}. Call +1 415 555 0134.",
    "佐藤花子さんが確認した。リリース {n} は金曜日の午後に延期。連絡先 hanako@example.jp",
    "Ask Kenji Watanabe before touching the retention job; token=ghp_{n}abcdefghijklmnopqrstuvwxyz0123456789",
    "Nothing personal here: the index rebuild {n} took 41 minutes on the replica, twice the estimate.",
]


def batch(count: int) -> list[str]:
    return [NOTES[n % len(NOTES)].format(n=n) for n in range(count)]


def parts_of(texts: list[str]) -> list[list[str]]:
    """``texts`` in the parts a bulk write masks them in (``part_ranges``): one a share, for every
    batch the tests split."""
    ranges = part_ranges([len(text) for text in texts])
    assert len(ranges) == len(PART_SHARES), "a batch too small to be split would never reach the helper"
    return [[texts[index] for index in indexes] for indexes in ranges]


def detected_in_parts(masker, helper: MaskingHelper, parts: list[list[str]], policy: MaskingPolicy) -> list[list]:
    """The detections of every text of ``parts``, in order, from ``helper.detect_parts`` with the
    masker's own ``detect_many`` as the caller's detection."""
    detect_here = partial(masker.detect_many, policy=policy)
    return [found for part in helper.detect_parts(parts, policy, detect_here, masker.version) for found in part]


def wait_until_ready(helper: MaskingHelper, version: str) -> None:
    deadline = time.monotonic() + 120
    while helper.state(version) != "ready":
        assert time.monotonic() < deadline, "the helper did not load in 120 s"
        time.sleep(0.2)


@pytest.fixture
def helper(masker, monkeypatch):
    """The shared helper, loaded, with a core to spare whatever else this machine runs now."""
    monkeypatch.setattr(helper_module, "spare_core", lambda: True)
    helper = shared_helper()
    wait_until_ready(helper, masker.version)
    return helper


def test_the_helper_detects_the_later_parts_as_this_process_would(masker, helper):
    texts = batch(200)
    parts = parts_of(texts)
    policy = MaskingPolicy(tenant_id="tenant-a", mode="pseudonym", pseudonym_key=b"test-key")
    answered = helper.answered

    found = detected_in_parts(masker, helper, parts, policy)

    assert helper.answered == answered + len(parts) - 1
    assert found == masker.detect_many(texts, policy)
    entities = {detection.entity for detections in found for detection in detections}
    assert {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "SECRET"} <= entities


def test_a_small_batch_stays_in_the_calling_process(masker, helper):
    texts = batch(3)
    assert sum(map(len, texts)) < MIN_CHARACTERS
    policy = MaskingPolicy(tenant_id="t")
    answered = helper.answered

    # Several parts, but too little text for the helper.
    assert detected_in_parts(masker, helper, [[text] for text in texts], policy) == masker.detect_many(texts, policy)
    assert helper.answered == answered


def test_a_killed_helper_loses_nothing_and_is_started_again(masker, helper):
    texts = batch(120)
    parts = parts_of(texts)
    policy = MaskingPolicy(tenant_id="tenant-a")
    expected = masker.detect_many(texts, policy)
    killed = helper._process
    killed.kill()
    killed.join(timeout=10)
    answered = helper.answered

    assert detected_in_parts(masker, helper, parts, policy) == expected  # detected here alone
    assert helper.answered == answered

    wait_until_ready(helper, masker.version)
    assert helper._process is not killed
    assert detected_in_parts(masker, helper, parts, policy) == expected
    assert helper.answered == answered + len(parts) - 1


def test_a_helper_of_another_version_is_not_used(masker, helper):
    parts = parts_of(batch(120))
    answered = helper.answered

    found = helper.detect_parts(parts, MaskingPolicy(tenant_id="t"), lambda part: [["here"]] * len(part), "pii-0")

    assert list(found) == [[["here"]] * len(part) for part in parts]
    assert helper.answered == answered


def test_an_error_in_the_helper_leaves_its_parts_to_the_caller(masker, helper):
    parts = parts_of(batch(120))
    answered = helper.answered

    # The helper's masker cannot read this policy; every part is detected by the caller.
    found = helper.detect_parts(parts, "not a policy", lambda part: [["here"]] * len(part), masker.version)

    assert list(found) == [[["here"]] * len(part) for part in parts]
    assert helper.answered == answered
    assert helper.state(masker.version) == "ready", "an error is answered; the helper stays"


def test_parts_are_masked_one_at_a_time_as_in_one_process(masker, helper):
    texts = batch(150)
    parts = parts_of(texts)
    policy = MaskingPolicy(tenant_id="tenant-a", mode="pseudonym", pseudonym_key=b"test-key")
    answered = helper.answered
    expected = masker.mask_each(texts, policy)

    masked = masker.mask_parts(parts, policy, parallel=True)
    first = next(masked)
    assert helper.state(masker.version) == "busy", "held while it owes answers"
    rest = [next(masked) for _ in parts[2:]]
    assert helper.state(masker.version) == "busy", "held until its last answer is read"
    rest.append(next(masked))
    assert helper.state(masker.version) == "ready", "free while the caller stores the last part"
    assert list(masked) == []

    assert [len(part) for part in [first, *rest]] == [len(part) for part in parts] and len(parts) == len(PART_SHARES)
    assert [result for part in [first, *rest] for result in part] == expected
    assert helper.answered == answered + len(parts) - 1
    assert helper.state(masker.version) == "ready"


def test_parts_left_unread_stop_the_helper_and_the_next_batch_gets_a_new_one(masker, helper):
    texts = batch(150)
    parts = parts_of(texts)
    policy = MaskingPolicy(tenant_id="t")
    masked = masker.mask_parts(parts, policy, parallel=True)
    next(masked)
    stopped = helper._process
    masked.close()

    assert not stopped.is_alive(), "its unread answers could block the pipe"
    assert helper.state(masker.version) == "loading"  # not held: a new helper is starting
    wait_until_ready(helper, masker.version)
    answered = helper.answered
    again = [result for part in masker.mask_parts(parts, policy, parallel=True) for result in part]
    assert again == masker.mask_each(texts, policy)
    assert helper.answered == answered + len(parts) - 1  # the new helper answered


def test_an_error_in_the_first_part_stops_the_helper_and_frees_it(masker, helper):
    texts = batch(150)
    stopped = helper._process

    def failing(part):
        raise RuntimeError("the caller's own part failed")

    with pytest.raises(RuntimeError):
        list(helper.detect_parts(parts_of(texts), MaskingPolicy(tenant_id="t"), failing, masker.version))

    assert not stopped.is_alive()
    assert helper.state(masker.version) == "loading"
    wait_until_ready(helper, masker.version)


def test_a_helper_killed_between_parts_leaves_the_rest_to_the_caller(masker, helper):
    texts = batch(150)
    parts = parts_of(texts)
    policy = MaskingPolicy(tenant_id="t")
    expected = masker.mask_each(texts, policy)
    answered = helper.answered

    os.kill(helper._process.pid, signal.SIGSTOP)  # it takes the request but answers nothing
    masked = masker.mask_parts(parts, policy, parallel=True)
    first = next(masked)
    helper._process.kill()
    rest = list(masked)

    assert [result for part in [first, *rest] for result in part] == expected
    assert helper.answered == answered  # every later part was detected here
    wait_until_ready(helper, masker.version)


def test_without_the_helper_parts_are_masked_here_in_order(masker):
    texts = batch(150)
    parts = parts_of(texts)
    policy = MaskingPolicy(tenant_id="t")

    masked = list(masker.mask_parts(parts, policy))

    assert [result for part in masked for result in part] == masker.mask_each(texts, policy)


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ([100] * 100, [range(0, 30), range(30, 60), range(60, 85), range(85, 100)]),  # 10,000 characters
        ([MIN_CHARACTERS // 10] * 10, [range(0, 3), range(3, 6), range(6, 8), range(8, 10)]),
        ([MIN_CHARACTERS, 1, 1, 1], [range(0, 1), range(1, 2), range(2, 3), range(3, 4)]),  # an item each
        ([1, 1, 1, MIN_CHARACTERS], [range(0, 1), range(1, 2), range(2, 3), range(3, 4)]),
        ([MIN_CHARACTERS, MIN_CHARACTERS], [range(0, 2)]),  # fewer items than parts
        ([40] * 100, [range(0, 100)]),  # too little text to share
    ],
)
def test_the_parts_follow_the_shares_with_an_item_each(sizes, expected):
    assert PART_SHARES == (0.3, 0.3, 0.25, 0.15)
    assert part_ranges(sizes) == expected


def test_with_every_core_busy_the_caller_detects_alone(masker, helper, monkeypatch):
    texts = batch(120)
    policy = MaskingPolicy(tenant_id="t")
    answered = helper.answered
    monkeypatch.setattr(helper_module, "spare_core", lambda: False)

    assert detected_in_parts(masker, helper, parts_of(texts), policy) == masker.detect_many(texts, policy)
    assert helper.answered == answered


@pytest.mark.parametrize(
    ("loadavg", "cores", "spare"),
    [("0.52 0.40 0.31 1/180 9001\n", 2, True), ("1.90 1.2 0.9 2/180 9001\n", 2, False), ("3.1 2 1 3/180 1\n", 4, True)],
)
def test_a_spare_core_is_fewer_runnable_tasks_than_cores(tmp_path, monkeypatch, loadavg, cores, spare):
    path = tmp_path / "loadavg"
    path.write_text(loadavg)
    monkeypatch.setattr(helper_module.os, "cpu_count", lambda: cores)

    assert spare_core(str(path)) is spare


def test_without_the_figure_a_core_counts_as_spare(tmp_path):
    assert spare_core(str(tmp_path / "missing")) is True
    (tmp_path / "odd").write_text("no figures here")
    assert spare_core(str(tmp_path / "odd")) is True
