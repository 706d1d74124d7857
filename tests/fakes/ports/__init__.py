"""In-memory fakes of the ports services use, for fast service-level tests without SQLite or AWS.

Each fake keeps its port's semantics and passes the port's contract suite in tests/contract (it is one of
the suite's factories), so a service test on the fakes checks the service, not a stand-in that agrees with
it. There is no graph fake: an openCypher engine is not something to imitate; graph tests use FalkorDB.
"""

from tests.fakes.ports.blobs import InMemoryBlobStore
from tests.fakes.ports.clock import FakeClock, RealClock
from tests.fakes.ports.credential_vault import InMemoryVault
from tests.fakes.ports.events import RecordingEventSink
from tests.fakes.ports.records import InMemoryRecordStore
from tests.fakes.ports.scheduler import InMemoryScheduler
from tests.fakes.ports.search_index import InMemorySearchIndex
from tests.fakes.ports.work_queue import InMemoryWorkQueue
from tests.fakes.ports.workflow import InMemoryWorkflowStarter

__all__ = [
    "FakeClock",
    "InMemoryBlobStore",
    "InMemoryRecordStore",
    "InMemoryScheduler",
    "InMemorySearchIndex",
    "InMemoryVault",
    "InMemoryWorkQueue",
    "InMemoryWorkflowStarter",
    "RealClock",
    "RecordingEventSink",
]
