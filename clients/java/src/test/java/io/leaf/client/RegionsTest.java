package io.leaf.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The multi-region protocol's calls against a real node acting as a global tier (any cluster can be one). */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RegionsTest {
    private static LeafNodes node;
    private static LeafClient client;

    @BeforeAll
    static void start() throws Exception {
        node = LeafNodes.single();
        client = LeafClient.builder().nodes(node.url(1)).token(LeafNodes.TOKEN).build();
    }

    @AfterAll
    static void stop() {
        if (client != null) {
            client.close();
        }
        if (node != null) {
            node.close();
        }
    }

    @Test
    void joinBlocksHomesLeaseMoveReleaseRetire() throws Exception {
        LeafAdmin admin = client.admin();
        Regions.Region eu = admin.joinRegion("eu", 16);
        assertEquals("eu", eu.name());
        assertEquals(16, eu.lastWorker() - eu.firstWorker() + 1, eu.toString());
        assertEquals(eu, admin.joinRegion("eu", 16), "a repeat answers the same record");
        Regions.Region us = client.async().admin().joinRegion("us", 16).get(30, TimeUnit.SECONDS);
        assertTrue(us.id() > eu.id());
        assertEquals(List.of("eu", "us"), admin.regions().stream().map(Regions.Region::name).toList());

        admin.createTag(CreateTag.of("glob-seg", 1000));
        IdRange a = admin.grantBlock("eu", "glob-seg", 500, null);
        IdRange b = admin.grantBlock("us", "glob-seg", 500, 10_000L);
        assertEquals(500, a.count());
        assertEquals(500, b.count());
        assertTrue(b.start() >= 10_000 && (a.end() <= b.start() || b.end() <= a.start()), a + " " + b);

        admin.createTag(CreateTag.of("glob-mono", 100).withProfile(Profile.MONOTONIC));
        Regions.Home home = admin.claimHome("eu", "glob-mono");
        assertEquals("eu", home.region());
        assertEquals("eu", admin.claimHome("us", "glob-mono").region(), "the first claim wins");
        Regions.Lease lease = admin.renewLease("eu");
        assertTrue(lease.untilMs() > System.currentTimeMillis() - 60_000, lease.toString());
        assertTrue(lease.homes().stream().anyMatch(h -> h.tag().equals("glob-mono")));
        assertTrue(admin.homes(ListQuery.prefix("glob-")).stream().anyMatch(h -> h.tag().equals("glob-mono")));

        Regions.Home moved = admin.moveHome("glob-mono", "us");
        assertEquals("us", moved.region());
        assertEquals("eu", moved.from());
        assertTrue(moved.epoch() > home.epoch());
        Regions.Home released = admin.releaseHome("eu", "glob-mono", moved.epoch());
        assertEquals("us", released.region());

        Regions.Region retired = admin.retireRegion("eu");
        assertNotNull(retired.retiredMs());
        assertEquals(retired.retiredMs(), admin.retireRegion("eu").retiredMs(), "a repeat answers the same record");
    }
}
