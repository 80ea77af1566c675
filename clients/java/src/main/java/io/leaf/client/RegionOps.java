package io.leaf.client;

import java.util.List;

/**
 * The multi-region protocol's calls on a global tier, defined once as {@link Op}s. All are
 * idempotent, as the Rust client sets them: joining answers the same record again, retiring
 * too; a repeated block grant leaves the first block a gap, never a duplicate; claiming,
 * releasing and moving a home answer the home as it stands; a lease renewal is measured from
 * before the first attempt by its caller.
 */
final class RegionOps {
    private RegionOps() {
    }

    static Op<List<Regions.Region>> regions() {
        return Op.json(Call.get(Paths.ADMIN_REGIONS), m -> Json.objList(m, "regions", Regions.Region::fromJson));
    }

    static Op<Regions.Region> joinRegion(String name, long workers) {
        Call call = Call.post(Paths.ADMIN_REGIONS, Json.write(Json.object("name", name(name), "workers", workers)),
                Safety.IDEMPOTENT, null);
        return Op.json(call, Regions.Region::fromJson);
    }

    static Op<Regions.Region> retireRegion(String name) {
        Call call = Call.post(Paths.fill(Paths.ADMIN_REGION_RETIRE, name(name)), null, Safety.IDEMPOTENT, null);
        return Op.json(call, Regions.Region::fromJson);
    }

    static Op<IdRange> grantBlock(String region, String tag, long size, Long above) {
        Validate.tag("a tag", tag);
        Call call = Call.post(Paths.fill(Paths.ADMIN_REGION_BLOCKS, name(region), tag),
                Json.write(Json.object("size", size, "above", above)), Safety.IDEMPOTENT, null);
        return Op.json(call, m -> new IdRange(Json.lng(m, "start"), Json.lng(m, "end")));
    }

    static Op<Regions.Home> claimHome(String region, String tag) {
        Validate.tag("a tag", tag);
        Call call = Call.post(Paths.fill(Paths.ADMIN_REGION_HOME, name(region), tag), null, Safety.IDEMPOTENT, null);
        return Op.json(call, Regions.Home::fromJson);
    }

    static Op<Regions.Home> releaseHome(String region, String tag, long epoch) {
        Validate.tag("a tag", tag);
        Call call = Call.post(Paths.fill(Paths.ADMIN_REGION_HOME_RELEASE, name(region), tag),
                Json.write(Json.object("epoch", epoch)), Safety.IDEMPOTENT, null);
        return Op.json(call, Regions.Home::fromJson);
    }

    static Op<Regions.Lease> renewLease(String region) {
        Call call = Call.post(Paths.fill(Paths.ADMIN_REGION_LEASE, name(region)), null, Safety.IDEMPOTENT, null);
        return Op.json(call, Regions.Lease::fromJson);
    }

    static Op<List<Regions.Home>> homes(ListQuery q) {
        return Op.json(Call.get(q.on(Paths.ADMIN_HOMES)), m -> Json.objList(m, "homes", Regions.Home::fromJson));
    }

    static Op<Regions.Home> moveHome(String tag, String region) {
        Validate.tag("a tag", tag);
        Call call = Call.post(Paths.fill(Paths.ADMIN_HOME_MOVE, tag), Json.write(Json.object("region", name(region))),
                Safety.IDEMPOTENT, null);
        return Op.json(call, Regions.Home::fromJson);
    }

    private static String name(String region) {
        return Validate.tag("a region name", region);
    }
}
