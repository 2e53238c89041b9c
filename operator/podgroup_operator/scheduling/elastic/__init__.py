"""The elastic quota tree (ElasticQuota, issue 60): pure decisions over normalized specs.

Kept apart, in names too, from the namespace ResourceQuota reservation (domain/quota.py): that
one is a hard static cap per namespace, this one a tree of quotas that lend idle capacity and
take it back. Both limits hold where both apply.

- `tree`: the tree built from `QuotaSpec`s, with the problems that keep it from being coherent;
- `usage`: what each quota uses, the sum of its bound members (so it survives restarts);
- `admission`: whether a whole gang fits its quota at every level, and why not, with numbers;
- `fairshare`: the weighted dominant share and the fair share of the surplus;
- `reclaim`: how much a quota below its min may take back from each other quota, never below
  their min, never against the no-loop invariant, and whether a gang ran long enough to lose;
- `queueing`: the order inside one quota (priority, or strict FIFO) and a gang's position.

The model and its choices: docs/decisions/023-elastic-quota-model.md.
"""
