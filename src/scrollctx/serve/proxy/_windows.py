"""The working view's window C for each model a client names.

One ``scroll serve`` fronts one upstream, but its clients name the model per request, and one
proxy may serve several. C is chosen for the model a request names as ``scroll ask`` chooses it
for its model (:func:`~scrollctx.agent.choose_budget`: the window the upstream's ``/v1/models``
reports, else the model table, else the default), once per model; ``--budget-tokens`` fixes it
for every model. A conversation's view takes the C of the model its latest request names
(a client switching models mid-conversation gets the new window from that request on).
"""

from __future__ import annotations

import threading

from scrollctx.agent import Budget, choose_budget
from scrollctx.agent.backends import Backend

__all__ = ["ModelWindows"]


class ModelWindows:
    """C per requested model (see the module docstring).

    Args:
        backend: the upstream (it reports windows; its own model stands in for a request
            that names none, as the upstream body then gets that model).
        given: ``--budget-tokens``: this C for every model.
    """

    def __init__(self, backend: Backend, given: int | None = None) -> None:
        self.backend, self.given = backend, given
        self._lock = threading.Lock()
        self._chosen: dict[str, Budget] = {}

    def budget(self, model: object) -> Budget:
        """The C of ``model`` (a request's ``model`` field, any JSON value) and its source."""
        name = model if isinstance(model, str) and model else self.backend.model
        with self._lock:
            known = self._chosen.get(name)
        if known is not None:
            return known
        # Outside the lock: asking the upstream's /v1/models must not hold up other models.
        chosen = choose_budget(self.backend, given=self.given, model=name)
        with self._lock:
            return self._chosen.setdefault(name, chosen)

    def tokens(self, model: object) -> int:
        """The C of ``model``, in tokens."""
        return self.budget(model).tokens
