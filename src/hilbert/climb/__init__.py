"""Hill-climbing against a metric (`hilbert climb`, docs/design/climb.md).

    events.py    the climb's kinds as typed records, registered beside the fleet's
    state.py     `ClimbState`: the fold of those records (the best, the noise, every try)
    metric.py    reading a metric's output, the median, the noise, which way is better
    neardup.py   near-duplicate tries: shingled diff tokens, Jaccard similarity
    measure.py   the harness's measurement: a clean read-only export, every command slot held
    tries.py     one try: an explorer's idea, gated, de-duplicated, measured, kept or reverted
    driver.py    the climb: opens or resumes the run, baseline, explorers in parallel, budgets
    results.py   `results.tsv` and the leaderboard, both from the fold

Nothing here is a second fleet: the explorers are `Worker`s (`hilbert.fleet.seams`), the gate is
`run_gate`, every command goes through the run's `Runner`.
"""
