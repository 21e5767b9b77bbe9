"""RQ entry points, named in app/queueing.py: ids in, a few lines each, the work is in app/<domain>.

delivery.deliver_batch(channel, ids) · delivery.drain_deliveries(queue, channel) ·
fanout.fanout_campaign(id) · bulk.run_bulk_operation(id) · digest.send_digests(ids)
"""
