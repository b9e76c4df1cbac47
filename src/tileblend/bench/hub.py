"""Whether the Hugging Face Hub answers, asked once with a short timeout before a checkpoint is loaded by its Hub ID.

Without network, huggingface_hub retries each request for a minute or more and then reports a missing file; one quick
request tells the two apart, so that a benchmark can name the network as the cause at once.
"""

import threading
import urllib.error
import urllib.request


PROBE_SECONDS = 5.0
"""How long the Hub may take to answer (name lookup included) before it counts as unreachable."""


def hub_reachable(endpoint: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether `endpoint` (huggingface_hub's, `HF_ENDPOINT` where set) answers an HTTP HEAD request within `timeout`
    seconds, with any status. The request honours the proxy variables (`HTTPS_PROXY`...) as huggingface_hub does."""
    answers = []

    def ask() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout)
        except urllib.error.HTTPError:
            pass  # an answer, whatever its status
        except (OSError, ValueError):
            return
        answers.append(True)

    # A thread, so that a name lookup that hangs (which urllib's timeout does not bound) is bounded too.
    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answers)
