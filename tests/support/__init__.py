"""Helpers shared by the whole suite; the fixture modules here are pytest plugins (see tests/conftest.py).

smtp      a recording aiosmtpd sink (in-process or as a process) and the `smtp_sink` fixture
push      a local Web Push service that verifies VAPID and decrypts, `push_service` and `vapid` fixtures
delivery  ledger rows for the delivery engine: `make_delivery`, `email_type`, `fake_provider`, reload()
waiting   wait_for (poll for a positive signal) and free_port
databases scratch databases on the test server (tests and benchmarks)
processes real processes for chaos tests and benchmarks (spawn, stop, the sink as a process)
load      set-based load data (thousands of pending deliveries in a few statements)
"""
