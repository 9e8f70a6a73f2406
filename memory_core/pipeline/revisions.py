"""Pipeline editing and revisions of the memory layer: config, insert, replace, remove, disable,
list, diff and rollback."""

from __future__ import annotations

from typing import Any

from memory_core.errors import NotFoundError
from memory_core.pipeline.contract import Pipeline, PipelineName, StepSpec
from memory_core.pipeline.editing import (
    PipelineSet,
    diff_sets,
    edit_config,
    edit_insert,
    edit_remove,
    edit_replace,
    set_from_json,
    set_to_json,
    validate,
)
from memory_core.pipeline.service_state import ServiceState
from memory_core.pipeline.steps import StepFn
from memory_core.storage.layer import RevisionRow

__all__ = ["PipelineRevisions"]


class PipelineRevisions(ServiceState):
    """Pipeline editing: each accepted change is validated and stored as a new revision
    that can be listed, diffed and rolled back to."""

    def register_step(self, impl: str, fn: StepFn) -> None:
        """Make a step implementation available to ``insert_*`` / ``replace`` by name."""
        self._registry[impl] = fn

    def _apply(self, pipelines: PipelineSet, change: str) -> int:
        validate(
            pipelines,
            registered=self._registry,
            profiles=self.profiles,
            role_profiles=self.role_profiles,
            capabilities=self.capabilities(),
        )
        revision = self.pipeline_revision + 1
        latest = self.store.revisions()
        if latest:
            revision = max(revision, latest[-1].revision + 1)
        self.store.add_revision(
            RevisionRow(revision, change, set_to_json(pipelines), self._clock())
        )
        self._pipelines = pipelines
        self._meta["pipeline_revision"] = revision
        self.store.set_meta(self._meta)
        return revision

    def config(self, step_id: str, **changes: Any) -> int:
        """Override a step's config (``llm_profile``, thresholds, ``top_k``…); returns the new
        revision.

        Raises:
            NotFoundError: no such step.
            ConfigError: the change fails validation (e.g. an undefined profile).
        """
        return self._apply(
            edit_config(self._pipelines, step_id, changes), f"config {step_id} {changes}"
        )

    def insert_after(self, step_id: str, new_step: StepSpec) -> int:
        """Insert ``new_step`` after ``step_id``; returns the new revision.

        Raises:
            NotFoundError: no such step.
            ConfigError: the new pipeline fails validation.
        """
        return self._apply(
            edit_insert(self._pipelines, step_id, new_step, after=True),
            f"insert {new_step.step_id} after {step_id}",
        )

    def insert_before(self, step_id: str, new_step: StepSpec) -> int:
        """Insert ``new_step`` before ``step_id`` (see :meth:`insert_after`)."""
        return self._apply(
            edit_insert(self._pipelines, step_id, new_step, after=False),
            f"insert {new_step.step_id} before {step_id}",
        )

    def replace(self, step_id: str, new_step: StepSpec) -> int:
        """Replace ``step_id`` by ``new_step`` (see :meth:`insert_after`)."""
        return self._apply(
            edit_replace(self._pipelines, step_id, new_step),
            f"replace {step_id} with {new_step.step_id}",
        )

    def remove(self, step_id: str) -> int:
        """Remove a step; refused when a later step needs what it produces."""
        return self._apply(edit_remove(self._pipelines, step_id, disable_only=False),
                           f"remove {step_id}")  # fmt: skip

    def disable(self, step_id: str) -> int:
        """Keep a step but skip it; refused like :meth:`remove`."""
        return self._apply(edit_remove(self._pipelines, step_id, disable_only=True),
                           f"disable {step_id}")  # fmt: skip

    def pipelines(self) -> dict[str, Any]:
        """The current pipelines as JSON."""
        return set_to_json(self._pipelines)

    def pipeline(self, name: PipelineName) -> Pipeline:
        return self._pipelines[name]

    def revisions(self) -> list[dict[str, Any]]:
        """Every pipeline revision: number, change, time."""
        return [
            {"revision": r.revision, "change": r.change, "created_at": r.created_at}
            for r in self.store.revisions()
        ]

    def _revision(self, revision: int) -> RevisionRow:
        for row in self.store.revisions():
            if row.revision == revision:
                return row
        raise NotFoundError(
            f"no pipeline revision {revision}",
            hint="list them with service.revisions() / memoir pipeline revisions",
        )

    def diff(self, old: int, new: int | None = None) -> dict[str, Any]:
        """What changed from revision ``old`` to ``new`` (default: the current one).

        Raises:
            NotFoundError: an unknown revision.
        """
        target = self._revision(new if new is not None else self.pipeline_revision)
        return diff_sets(self._revision(old).pipelines, target.pipelines)

    def rollback(self, revision: int) -> int:
        """Restore the pipelines of ``revision`` as a new revision; returns its number.

        Raises:
            NotFoundError: an unknown revision.
            ConfigError: that revision no longer validates (e.g. its step impl is gone).
        """
        row = self._revision(revision)
        return self._apply(set_from_json(row.pipelines), f"rollback to {revision}")
