package io.leaf.client;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Capped exponential backoff with jitter: before retry {@code n} (0-based) a call waits a
 * random time between half and all of {@code min(cap, base * 2^n)}.
 */
record Backoff(Duration base, Duration cap) {
    Backoff {
        if (base.isNegative() || base.isZero() || cap.compareTo(base) < 0) {
            throw new IllegalArgumentException("backoff needs 0 < base <= cap");
        }
    }

    /** The wait before retry {@code retry} (0-based). */
    Duration delay(int retry) {
        long baseNanos = base.toNanos();
        long capNanos = cap.toNanos();
        int shift = Math.min(Math.max(retry, 0), 20);
        long full = baseNanos > (capNanos >> shift) ? capNanos : Math.min(capNanos, baseNanos << shift);
        long half = full / 2;
        return Duration.ofNanos(half + ThreadLocalRandom.current().nextLong(half + 1));
    }
}
