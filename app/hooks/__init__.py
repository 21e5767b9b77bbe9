"""Provider events in: e-mail providers' webhooks, verified, read and recorded against the delivery ledger."""
