"""The recording SMTP sink as a process: `--stamp` logs each message's receipt time with its Message-ID."""

from __future__ import annotations

import smtplib
import time
from email.message import EmailMessage

from tests.support import processes
from tests.support.smtp import stamped_arrivals
from tests.support.waiting import free_port


def test_stamped_log_has_receipt_time_and_message_id(tmp_path):
    port, log = free_port(), tmp_path / "sink.log"
    sink = processes.start_sink(port, log, tmp_path / "sink.out", stamp=True)
    try:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "Hi"
        message["Message-ID"] = "<delivery-42@hato.test>"
        message.set_content("Body")
        before = time.time()
        with smtplib.SMTP("127.0.0.1", port, timeout=5) as client:
            client.send_message(message)
        after = time.time()
    finally:
        processes.stop(sink)
    [(received, message_id)] = stamped_arrivals(log)
    assert message_id == "<delivery-42@hato.test>"
    assert before <= received <= after


def test_unstamped_log_keeps_one_message_id_per_line(tmp_path):
    port, log = free_port(), tmp_path / "sink.log"
    sink = processes.start_sink(port, log, tmp_path / "sink.out")
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=5) as client:
            client.sendmail("a@example.com", ["b@example.com"], "Message-ID: <m-1@x>\r\nSubject: x\r\n\r\nBody")
    finally:
        processes.stop(sink)
    assert processes.message_ids(log) == ["<m-1@x>"]
