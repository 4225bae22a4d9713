"""Workers' names: the shipped list, handing names out (`allocate`) and finding a worker again (`lookup`)."""

from __future__ import annotations

import re

import pytest

from hilbert.errors import UserError
from hilbert.fleet.names import NAMES, Name, allocate, lookup, to_id

ID_SHAPE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def test_the_list_has_at_least_256_names_with_unique_plain_ids_and_displays() -> None:
    assert len(NAMES) >= 256
    ids = [name.id for name in NAMES]
    displays = [name.display for name in NAMES]
    assert len(set(ids)) == len(ids)
    assert len(set(displays)) == len(displays)
    for name in NAMES:
        assert name.id.isascii() and ID_SHAPE.fullmatch(name.id), name
        assert name.display.strip() == name.display != "", name
        # a base id never looks like a suffixed one, so "-2" names cannot collide with the list
        assert not re.search(r"-\d+$", name.id), name


def test_displays_keep_their_accents_and_ids_fold_them() -> None:
    by_display = {name.display: name.id for name in NAMES}
    assert by_display["Poincaré"] == "poincare"
    assert by_display["Erdős"] == "erdos"
    assert by_display["Noether"] == "noether"
    assert by_display["Łojasiewicz"] == "lojasiewicz"  # ł is not split by NFKD; the explicit map folds it
    assert by_display["Gauß"] == "gauss"
    assert by_display["d'Alembert"] == "d-alembert"
    assert by_display["von Neumann"] == "von-neumann"
    assert "hilbert" not in by_display.values()


def test_to_id_folds_letters_nfkd_keeps_whole() -> None:
    assert to_id("Ørsted") == "orsted"
    assert to_id("Cæsar Đorđević") == "caesar-dordevic"
    assert to_id("  Harish-Chandra ") == "harish-chandra"
    assert to_id("Erdős 2") == "erdos-2"


def test_allocate_hands_out_the_list_in_order_then_suffixed_names() -> None:
    names = allocate(1000)
    assert len(names) == 1000
    assert len({n.id for n in names}) == 1000
    assert len({n.display for n in names}) == 1000
    assert names[: len(NAMES)] == list(NAMES)
    first = NAMES[0]
    assert names[len(NAMES)] == Name(id=f"{first.id}-2", display=f"{first.display} 2")
    assert names[2 * len(NAMES)] == Name(id=f"{first.id}-3", display=f"{first.display} 3")
    erdos_2 = next(n for n in names if n.id == "erdos-2")
    assert erdos_2.display == "Erdős 2"
    assert all(ID_SHAPE.fullmatch(n.id) for n in names)
    assert allocate(1000) == names  # deterministic
    assert allocate(0) == []


def test_allocate_skips_taken_names_including_suffixed_ones() -> None:
    first, second, third = NAMES[0], NAMES[1], NAMES[2]
    assert allocate(2, taken=[first.id]) == [second, third]
    # taken ids may be typed loosely: "Poincaré" takes poincare
    assert allocate(1, taken=["Poincaré"])[0].id != "poincare"

    everything = [n.id for n in NAMES] + [f"{first.id}-2"]
    past = allocate(2, taken=everything)
    assert [n.id for n in past] == [f"{second.id}-2", f"{third.id}-2"]

    # a run that grows: each new batch avoids what the earlier batches got
    batch1 = allocate(200)
    batch2 = allocate(200, taken=[n.id for n in batch1])
    ids = [n.id for n in batch1 + batch2]
    assert len(set(ids)) == 400


def test_allocate_refuses_a_negative_count() -> None:
    with pytest.raises(UserError, match="cannot name -1 workers"):
        allocate(-1)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("poincare", "poincare"),
        ("Poincaré", "poincare"),
        ("POINCARE", "poincare"),
        ("  poincaré ", "poincare"),
        ("erdos", "erdos"),
        ("ERDŐS", "erdos"),
        ("Erdős 2", "erdos-2"),
        ("erdos-2", "erdos-2"),
        ("erdos 2", "erdos-2"),
        ("erdos2", "erdos-2"),
        ("lojasiewicz", "lojasiewicz"),
        ("gauss", "gauss"),
        ("Mac Lane", "mac-lane"),
        ("maclane", "mac-lane"),
        ("dalembert", "d-alembert"),
        ("Mc Duff", "mcduff"),
        ("Choquet Bruhat", "choquet-bruhat"),
    ],
)
def test_lookup_finds_a_worker_by_what_a_person_types(typed: str, expected: str) -> None:
    workers = allocate(len(NAMES) + 10)
    found = lookup(typed, workers)
    assert found is not None and found.id == expected


def test_lookup_answers_none_for_unknown_or_empty_text() -> None:
    workers = allocate(5)
    assert lookup("nobody", workers) is None
    assert lookup("", workers) is None
    assert lookup(" - ", workers) is None
    assert lookup("erdos-2", workers) is None  # not in this run
    assert lookup("Poincaré", []) is None
