"""Background ingest jobs: a long ``ingest`` call returns a job id at once, and the resource
``memoir://jobs/{job_id}`` reports its progress and, when done, its result or error.

Jobs live in the server process (a restart forgets them; the ingest itself resumes when sent
again, batch by batch). Finished jobs are kept for the last :data:`KEPT` jobs.
"""

# No `from __future__ import annotations`: the SDK reads the resource signature at registration.

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError

from memory_core.errors import MemoirError
from memory_core.models import utc_now

__all__ = ["JOBS_URI", "KEPT", "IngestJob", "IngestJobs", "register_jobs_resource"]

JOBS_URI = "memoir://jobs/"
KEPT = 100


@dataclass
class IngestJob:
    job_id: str
    status: Literal["running", "done", "error"] = "running"
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    progress: dict[str, int] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class IngestJobs:
    """The server's background ingests, by id."""

    def __init__(self) -> None:
        self.jobs: dict[str, IngestJob] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Callable[[IngestJob], Awaitable[dict[str, Any]]]) -> IngestJob:
        """Run ``work(job)`` in the background; it updates ``job.progress`` as it goes."""
        job = IngestJob(job_id=uuid.uuid4().hex[:16])
        self.jobs[job.job_id] = job
        finished = [j for j in self.jobs.values() if j.status != "running"]
        for old in finished[: max(0, len(finished) - KEPT)]:
            self.jobs.pop(old.job_id, None)

        async def run() -> None:
            try:
                job.result = await work(job)
                job.status = "done"
            except MemoirError as error:
                job.status = "error"
                job.error = {"message": error.message, "hint": error.hint, "code": error.code}
            except Exception as error:  # the outermost edge of a detached task
                job.status = "error"
                job.error = {"message": f"{type(error).__name__}: {error}"[:500]}
            job.finished_at = utc_now()

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job


def register_jobs_resource(app: MCPServer, jobs: IngestJobs) -> None:
    @app.resource(
        JOBS_URI + "{job_id}",
        name="ingest-job",
        title="A background ingest",
        description="Progress (bytes, batches, chunks) and, once finished, the result or error "
        "of an ingest that runs in the background.",
        mime_type="application/json",
    )
    async def ingest_job(job_id: str) -> str:
        job = jobs.jobs.get(job_id)
        if job is None:
            raise ResourceError(
                f"no ingest job {job_id!r} (hint: jobs are kept while the server runs; "
                "send the ingest again, it resumes after its last stored batch)"
            )
        return json.dumps(job.as_dict(), indent=2)
