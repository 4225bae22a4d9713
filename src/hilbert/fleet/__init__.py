"""The fleet: the plan, the scheduler, the workers' names and the merge queue that together let a lead
and many named workers carry out a goal in parallel. Issue 3 builds it; today only `names` lives here
(`names`: the curated list of mathematicians' names, `allocate` and `lookup`).
"""
