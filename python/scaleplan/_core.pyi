"""Type stubs of the native module scaleplan._core (python/src/core.cc).

Requests and results cross as JSON text; use the functions of the ``scaleplan`` package, which
build the requests from keyword arguments and the typed results from the JSON."""

from typing import Any, Callable, Dict, Optional

ProgressCallback = Callable[[Dict[str, Any]], None]

class Error(ValueError):
    """A Status that is not ok: ``args == (message, code)``."""

def plan(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan plan --json`` for the request object text."""

def simulate(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan simulate --json`` for the request object text."""

def model(request: str) -> str:
    """The JSON text of ``scaleplan model --json`` for the request object text."""

def model_list() -> str:
    """The JSON text of ``scaleplan model list --json``."""

def memory(request: str) -> str:
    """The JSON text of ``scaleplan memory --json`` for the request object text."""

def collective(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan collective --json`` for the request object text."""

def validate(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan validate FILE --json`` for the request object text."""

def sweep(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan sweep --json`` for the request object text."""

def run(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan run --json`` for the request object text."""

def compare(request: str) -> str:
    """The JSON text of ``scaleplan compare --json`` for the request object text."""

def refit(request: str) -> str:
    """The JSON text of ``scaleplan refit --json`` for the request object text."""

def profile(request: str, progress: Optional[ProgressCallback] = None) -> str:
    """The JSON text of ``scaleplan profile --json`` for the request object text."""

def cluster_list() -> str:
    """The JSON text of ``scaleplan cluster list --json``."""

def cluster_show(name_or_path: str) -> str:
    """The JSON text of ``scaleplan cluster show C --json``: the profile with unit strings and
    its path."""

def fields(command: str) -> str:
    """The JSON text of a described command's fields (``"simulate"``, ``"sweep"``):
    ``[{"name", "option", "type", "help", "default", "choices"}]``, the keyword arguments its
    function takes."""

def parse_layout(text: str) -> str:
    """A layout string in canonical form."""
