"""How pytest-xdist hands out `make test`'s tests: whole files (``--dist loadfile``), except the
modules of :data:`SPREAD_MODULES`, whose tests are handed out one by one, before anything else.

A file is the unit because a module's tests share its fixtures and its servers. The modules
spread are long and share nothing between their tests (each starts processes of its own, or
is one shard of the fuzz test). The fuzz test's 12,000 messages, one file, took 104 s on one
worker while the three others ended their share of the SQLite leg in about 45 s; then the two
modules of lazy imports (about 30 s each) were the tail. Spread first, no worker starts them
last. The files of :data:`FIRST_MODULES` go next, whole: long waits of one or two tests that
would otherwise come last, having the fewest tests. The other files go in xdist's own order (the
most tests first: ``--loadscope-reorder``).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

SPREAD_MODULES = frozenset({"test_fuzz.py", "test_lazy_start.py", "test_lazy_views.py"})
# test_faults.py's one untimed test waits out the relay's 15 s and 5 s (about 25 s in all).
FIRST_MODULES = frozenset({"test_faults.py"})


def _module(scope: str) -> str:
    return scope.split("::", 1)[0].rsplit("/", 1)[-1]


def spread(scope: str) -> bool:
    return _module(scope) in SPREAD_MODULES


class SpreadFirstScheduling(LoadFileScheduling):
    _spread_moved = False

    def _split_scope(self, nodeid: str) -> str:
        return nodeid if spread(nodeid) else super()._split_scope(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        # The queue is complete by the first assignment (LoadScopeScheduling.schedule). Moving
        # units keeps the workers' collections as they are: work is sent as indices into them.
        if not self._spread_moved:
            first = [scope for scope in self.workqueue if spread(scope)]
            first += [scope for scope in self.workqueue if _module(scope) in FIRST_MODULES]
            for scope in reversed(first):
                self.workqueue.move_to_end(scope, last=False)
            self._spread_moved = True
        super()._assign_work_unit(node)
