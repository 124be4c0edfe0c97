"""The progress lines of a campaign: a PBT worker's unfinished segments show as progress, never
as the campaign's best result."""

from __future__ import annotations

from evogan.search.follow import Tally


def _row(name: str, fitness: float, partial: bool = False, status: str = "ok") -> dict:
    return {"id": name, "fitness": fitness, "partial": partial, "status": status, "ranks": [0]}


def test_pbt_segments_lead_until_a_worker_finishes() -> None:
    tally = Tally(6, [])
    assert tally.best_text() == "none yet"
    for row in (_row("w00s000", 8.5, True), _row("w01s000", 7.7, True), _row("w00s001", 9.0)):
        tally.count(row)
    assert tally.best == (9.0, "w00s001") and tally.leading == (7.7, "w01s000")
    assert tally.best_text() == "9.0000 (w00s001)"
    line = tally.line(_row("w00s001", 9.0), eta=60.0)
    assert line.startswith("search: candidate 3 of 6: w00s001 on ranks [0] ok, fitness 9.0000")
    assert line.endswith("best so far 9.0000 (w00s001); ETA 1m00s")


def test_only_unfinished_segments_are_named_as_such() -> None:
    tally = Tally(4, [_row("w00s000", 6.1, True), _row("w01s000", float("nan"), True, "nan")])
    assert tally.done == 2 and tally.earlier == 2
    assert tally.best_text() == "none yet (workers training, best segment 6.1000 (w00s000))"
    assert not tally.count({"id": "x", "status": "invalid"})
    assert tally.done == 2
