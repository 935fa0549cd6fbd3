"""Mneme on one machine: :mod:`workers.local.stack` starts and stops the whole stack (``make run``) and writes
the state file tools find it by; :mod:`workers.local.demo` plays a conversation against it (``make demo``)."""
