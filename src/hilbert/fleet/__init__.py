"""The fleet: the plan, the scheduler, the workers' names and the merge queue that together let a lead
and many named workers carry out a goal in parallel. Issue 3 builds it; so far: `names` (mathematicians'
names, `allocate`, `lookup`), `plan` (`Task`, `Plan`, PLAN.md `parse_plan` / `write_plan`),
`plan_markdown` (reading PLAN.md's fences and sections) and `scheduler` (pure decisions: `ready`,
`after_failure`, `blocked`, `deadlocked`, `is_finished` over `TaskState`s derived from the log) and
`merge_queue` (+ `merge_checks`: batch, merge, check once, bisect a red batch, flaky re-run).
"""
