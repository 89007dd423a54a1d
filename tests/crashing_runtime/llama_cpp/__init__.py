"""A stand-in for llama-cpp-python whose model dies by a signal the moment it is loaded, as a llama.cpp build
for instructions the CPU traps does at its first matrix product. Only the runtime check's child loads one.

CRASH_SIGNAL names the signal (SEGV by default); each load is noted in the file CRASH_LOG, if set.
"""
import os
import signal

__version__ = "0.3.36"


class Llama:
    def __init__(self, model_path, **options):
        if os.environ.get("CRASH_LOG"):
            with open(os.environ["CRASH_LOG"], "a") as log:
                log.write(f"{model_path}\n")
        os.kill(os.getpid(), getattr(signal, f"SIG{os.environ.get('CRASH_SIGNAL', 'SEGV')}"))
