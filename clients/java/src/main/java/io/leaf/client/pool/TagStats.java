package io.leaf.client.pool;

import java.time.Duration;

/**
 * A snapshot of one tag's (or snowflake key's) pool; approximate while callers take IDs.
 *
 * @param kind segment or snowflake
 * @param name the tag or key
 * @param idsServed IDs taken from the shared buffer (those in threads' local chunks included)
 * @param idsLeased IDs received in successful leases
 * @param idsRetired IDs dropped unused (snowflake IDs too old; a lease answered too late)
 * @param idsBuffered IDs leased and not yet taken
 * @param leasesOk successful leases
 * @param leasesFailed failed leases (each retried with backoff)
 * @param lastLeaseSize IDs asked for in the last successful lease
 * @param leaseTarget the size the next lease will ask for (before its adaptation)
 * @param ratePerSec IDs per second used between the last two lease requests
 * @param waits calls that found nothing buffered and waited (or failed fast)
 * @param waitTime time spent in those waits, in total
 * @param exhausted {@link io.leaf.client.PoolExhaustedException}s thrown
 * @param rejected {@link io.leaf.client.PoolRejectedException}s thrown
 */
public record TagStats(IdKind kind, String name, long idsServed, long idsLeased, long idsRetired, long idsBuffered,
        long leasesOk, long leasesFailed, long lastLeaseSize, long leaseTarget, double ratePerSec, long waits,
        Duration waitTime, long exhausted, long rejected) {
}
