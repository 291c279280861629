"""chorus as a torch.distributed backend.

Importing this package registers the backend "chorus":

    import torch.distributed as dist
    import chorus_torch
    dist.init_process_group("chorus")   # env://, tcp://, file://; torchrun works as is

Rendezvous goes through the c10d store torch hands the backend. CHORUS_COMMUNICATION,
CHORUS_ALGORITHM, CHORUS_TUNING_FILE and every other chorus variable mean what they mean in chorus.
"""

import torch.distributed as _dist

from ._C import ProcessGroupChorus, create_process_group

__all__ = ["ProcessGroupChorus", "create_process_group", "BACKEND"]

BACKEND = "chorus"

# Backend.register_backend refuses a second registration of a name.
if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, create_process_group)
