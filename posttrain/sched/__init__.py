"""The task scheduler: work items, fair-share priority queues, retries, exactly-once commit, scaling.

A pure core with no Ray and no torch: the local backend runs it over thread pools, `posttrain.dist`
over Ray actor pools.
"""
