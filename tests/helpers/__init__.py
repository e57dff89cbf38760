"""Test helpers shared by more than one test folder, imported as ``tests.helpers.X``
(the tests' conftest puts the project root on ``sys.path``), never by editing
``sys.path`` to reach another folder.

- :mod:`tests.helpers.waiting`: ``wait_for`` / ``wait_or_fail``, polling a condition
  with a timeout;
- :mod:`tests.helpers.sockets`: ``recv_datagrams``, what a socket got within a time;
- :mod:`tests.helpers.p4int`: the harness of ``p4/int_rocev2.p4`` on softswitch
  (switches, chains, frames, independent decoders), used by the P4 INT tests and by
  the collector and loss-map tests that check the program's real output.
"""
