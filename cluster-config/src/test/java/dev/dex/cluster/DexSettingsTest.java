package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.core.offload.OffloadSettings;

class DexSettingsTest {

    @Test
    void theDefaultsOfReferenceConfAreValid() {
        DexSettings settings = DexSettings.from(DexNodes.config(ConfigFactory.empty()));
        assertEquals("local", settings.fabric().transport());
        assertEquals(64, settings.memory().partitions().count());
        assertEquals(3, settings.memory().subtreeLevel());
        assertEquals(1, settings.memory().offloadThreads());
        assertFalse(settings.memory().format(), "a restarted memory node reattaches unless told to format");
        assertTrue(DexSettings.from(DexNodes.config(ConfigFactory.parseString("dex.memory.format = on"))).memory().format());
        assertEquals(dev.dex.core.cache.EngineMode.DEX, settings.compute().engine().mode());
        assertEquals(OffloadSettings.Policy.COST_MODEL, settings.compute().engine().offload().policy());
        assertEquals(256L << 20, settings.compute().engine().cacheBytes());
        assertEquals(0.1, settings.compute().engine().leafAdmission());
        assertTrue(DexSettings.from(DexNodes.config(ConfigFactory.parseString("dex.compute.leaf-admission = auto"))).compute()
                .engine().tunesLeafAdmission(), "auto: P_A tuned by the engine");
        assertEquals(java.time.Duration.ofSeconds(5), settings.compute().describeTimeout());
        assertEquals(dev.dex.actors.node.Backoff.DEFAULTS, settings.compute().handshake());
    }

    @Test
    void theRebalanceProbeIsOnByDefaultAndCanBeTurnedOff() {
        assertEquals(java.time.Duration.ofMillis(400),
                DexSettings.from(DexNodes.config(ConfigFactory.empty())).compute().rebalanceProbeTimeout());
        assertEquals(java.time.Duration.ZERO, DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.rebalance-probe-timeout = off"))).compute().rebalanceProbeTimeout());
        assertThrows(IllegalArgumentException.class, () -> DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.rebalance-probe-timeout = 0s"))), "zero is spelt off");
    }

    @Test
    void theMergeSweepWaitsTwoSecondsByDefaultAndCanBeTurnedOff() {
        assertEquals(java.time.Duration.ofSeconds(2), DexSettings.from(DexNodes.config(ConfigFactory.empty())).compute().mergeSweep());
        assertEquals(java.time.Duration.ZERO, DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.merge-sweep = off"))).compute().mergeSweep());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.merge-sweep = -1s")))).getMessage().contains("dex.compute.merge-sweep must be positive"));
        assertThrows(com.typesafe.config.ConfigException.class, () -> DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.merge-sweep = sometimes"))), "neither a duration nor off");
    }

    @Test
    void aLeaveHandsAtMostSixteenPartitionsOverPerRoundByDefaultWithinTheFirstShutdownPhase() {
        assertEquals(dev.dex.actors.partition.LeaveDrain.Settings.DEFAULTS.group(),
                DexSettings.from(DexNodes.config(ConfigFactory.empty())).compute().leave().group());
        assertEquals(new dev.dex.actors.partition.LeaveDrain.Settings(16, java.time.Duration.ofSeconds(20)),
                DexSettings.from(DexNodes.config(ConfigFactory.empty())).compute().leave());
        assertEquals(0, DexSettings.from(DexNodes.config(ConfigFactory.parseString("dex.compute.leave.handoff-group = 0")))
                .compute().leave().group(), "0: all at once");
        assertTrue(assertThrows(IllegalArgumentException.class, () -> DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.leave.handoff-group = -1")))).getMessage().contains("dex.compute.leave.handoff-group must be in [0, 1024]"));
        String tooLong = assertThrows(IllegalArgumentException.class, () -> DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.leave.drain-timeout = 23s")))).getMessage();
        assertTrue(tooLong.contains("at least 3 s under pekko.coordinated-shutdown.phases.before-service-unbind.timeout (25000 ms)"),
                tooLong);
        assertEquals(java.time.Duration.ofSeconds(50), DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.compute.leave.drain-timeout = 50s\npekko.coordinated-shutdown.phases.before-service-unbind.timeout = 60s")))
                .compute().leave().timeout(), "a longer drain with a longer phase");
    }

    @Test
    void theClusterSettingsTurnOffPassivationAndUseTheSplitBrainResolver() {
        Config config = DexNodes.config(ConfigFactory.empty());
        assertEquals("none", config.getString("pekko.cluster.sharding.passivation.strategy"));
        assertTrue(config.getInt("pekko.cluster.sharding.least-shard-allocation-strategy.rebalance-absolute-limit") > 0,
                "the improved least-shard allocation is on only with an absolute limit above 0");
        assertEquals("org.apache.pekko.cluster.sbr.SplitBrainResolverProvider", config.getString("pekko.cluster.downing-provider-class"));
        assertEquals("jackson-cbor", config.getString("pekko.actor.serialization-bindings.\"dev.dex.actors.CborSerializable\""));
    }

    @ParameterizedTest(name = "{0} = {1}")
    @CsvSource(delimiter = '|', value = {
            "dex.fabric.transport     | udp    | dex.fabric.transport must be local, shm, tcp or disni",
            "dex.fabric.tcp.port      | 70000  | dex.fabric.tcp.port must be in [0, 65535]",
            "dex.fabric.tcp.window    | 0      | dex.fabric.tcp.window must be in [1, 65536]",
            "dex.client.window        | 0      | dex.client.window must be in [1, 64]",
            "dex.client.window        | 65     | dex.client.window must be in [1, 64]",
            "dex.fabric.tcp.max-transfer | 1KiB | dex.fabric.tcp.max-transfer must be in [4096, 16777216]",
            "dex.fabric.tcp.max-connections | 0 | dex.fabric.tcp.max-connections must be in [1, 1048576]",
            "dex.fabric.tcp.verb-timeout | 0s  | dex.fabric.tcp.verb-timeout must be > 0",
            "dex.fabric.latency-ns    | -1     | dex.fabric.latency-ns must be >= 0",
            "dex.memory.server-id     | 40000  | dex.memory.server-id must be in [0, 32767]",
            "dex.memory.region-size   | 1536KiB | must be a multiple of dex.memory.chunk-size",
            "dex.memory.chunk-size    | 3000   | dex.memory.chunk-size",
            "dex.memory.offload-threads | 0    | dex.memory.offload-threads must be in [1, 1024]",
            "dex.tree.subtree-level   | 16     | dex.tree.subtree-level must be in [0, 15]",
            "dex.tree.partitions      | 0      | partition count must be in [1, 1024]",
            "dex.tree.partitions      | 1025   | partition count must be in [1, 1024]",
            "dex.compute.rebalance-rounds | 0 | dex.compute.rebalance-rounds must be at least 1: 0",
            "dex.compute.rebalance-round-minimum | 0 | dex.compute.rebalance-round-minimum must be at least 1: 0",
            "dex.compute.rebalance-round-maximum | 7 | dex.compute.rebalance-round-maximum (7) must be at least dex.compute.rebalance-round-minimum (8)",
            "dex.compute.mode         | fast   | dex.compute.mode: engine mode must be one of dex, offload-only, no-offload, sherman, partitioned: fast",
            "dex.compute.leaf-admission | 2    | leaf admission probability must be auto or in [0, 1]",
            "dex.compute.leaf-admission | often | leaf admission must be auto or a probability in [0, 1]: often",
            "dex.compute.worker-threads | 0    | dex.compute.worker-threads must be in [1, 1024]",
            "dex.compute.handshake.describe-timeout | 0s | dex.compute.handshake.describe-timeout must be positive",
            "dex.compute.load-window | 500ms | dex.compute.load-window must be at least 1s (a compute node closes its windows on its health tick, every second): PT0.5S",
            "dex.compute.handshake.min-backoff | 10s | dex.compute.handshake: a backoff needs 0 < min <= max",
            "dex.demo.seconds         | 0      | dex.demo.seconds must be in [1, 3600]"})
    void aBadSettingFailsWithItsKeyInTheMessage(String key, String value, String message) {
        assertBad(key + " = \"" + value + "\"", message);
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            // a setting under the wrong section: the one with its last name
            "dex.memory.partitions = 4          | unknown setting dex.memory.partitions (did you mean dex.tree.partitions?)",
            // of keys with that last name, the nearest: tcp's host, not disni's
            "dex.fabric.tpc.host = x           | unknown setting dex.fabric.tpc.host (did you mean dex.fabric.tcp.host?)",
            // a typo: the one a few edits away
            "dex.compute.cache-sise = 8MiB      | unknown setting dex.compute.cache-sise (did you mean dex.compute.cache-size?)",
            // nothing near: no suggestion
            "dex.nothing-like-it = 1            | unknown setting dex.nothing-like-it; the modules' reference.conf",
            // every one, sorted
            "dex.zz = 1\\ndex.memory.partitions = 4 | unknown settings dex.memory.partitions (did you mean dex.tree.partitions?), dex.zz;"})
    void aKeyNoReferenceConfNamesFailsWithTheNearestKnownOne(String settings, String message) {
        assertBad(settings.replace("\\n", "\n"), message);
    }

    @Test
    void replicaGroupsOnTheLocalFabricRefuseAnEngineThatOffloadsEveryMiss() {
        // Compute nodes write every replica themselves there; an offload would change the primary's region alone.
        assertBad("dex.fabric.transport = local\ndex.memory.replicas = 2\ndex.compute.mode = offload-only",
                "dex.compute.mode = offload-only cannot run with dex.memory.replicas = 2 on the local fabric");
        DexSettings dex = DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.fabric.transport = local\ndex.memory.replicas = 2\ndex.compute.mode = dex")));
        assertEquals(2, dex.memory().replicas(), "dex runs there (as no-offload)");
    }

    @Test
    void everyKeyOfTheShippedConfigurationIsKnown() {
        // The cluster's file and the role files must set no dex key the check would refuse.
        for (String role : new String[] {"memory", "compute", "client"}) {
            DexSettings.from(DexNodes.nodeConfig(DexNodes.config(ConfigFactory.empty()), role, "127.0.0.1", 0, java.util.List.of()));
        }
        // A system property is a tool's, not a setting: bin/dex passes -Ddex.progress to every command. A file's
        // unknown key beside it still fails, and names only itself.
        System.setProperty("dex.progress", "plain");
        try {
            com.typesafe.config.ConfigFactory.invalidateCaches();
            DexSettings.from(DexNodes.config(ConfigFactory.empty()));
            assertBad("dex.tree.partitionz = 4", "unknown setting dex.tree.partitionz (did you mean dex.tree.partitions?);");
        } finally {
            System.clearProperty("dex.progress");
            com.typesafe.config.ConfigFactory.invalidateCaches();
        }
        assertEquals(1, DexSettings.editDistance("cache-size", "cache-sise"));
        assertEquals(3, DexSettings.editDistance("kitten", "sitting"));
        assertEquals(0, DexSettings.editDistance("", ""));
    }

    @Test
    void morePartitionsThanTheChunksHoldFailNamingBothSettings() {
        assertBad("dex.memory.chunk-size = 4KiB\ndex.memory.region-size = 1MiB\ndex.tree.partitions = 498",
                "dex.tree.partitions (498) do not fit the superblock in chunks of 4096 bytes, which hold 497; raise dex.memory.chunk-size");
        DexSettings.from(DexNodes.config(ConfigFactory.parseString(
                "dex.memory.chunk-size = 4KiB\ndex.memory.region-size = 1MiB\ndex.tree.partitions = 497")));
    }

    private static void assertBad(String settings, String message) {
        Config config = DexNodes.config(ConfigFactory.parseString(settings));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DexSettings.from(config));
        assertTrue(e.getMessage().contains(message), e.getMessage());
    }

    @ParameterizedTest(name = "{0} = {1}")
    @CsvSource(delimiter = '|', value = {
            "dex.fabric.disni.host         | 0.0.0.0 | dex.fabric.disni.host must name the address of an RDMA interface",
            "dex.fabric.disni.max-transfer | 5000    | dex.fabric.disni.max-transfer must be a power of two",
            "dex.fabric.disni.queue-depth  | 0       | dex.fabric.disni.queue-depth must be in [1, 4096]"})
    void aBadDisniSettingFailsWithItsKeyWhenTheFabricIsDisni(String key, String value, String message) {
        Config disni = DexNodes.config(ConfigFactory.parseString(key + " = \"" + value + "\"\ndex.fabric.transport = disni"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DexSettings.from(disni));
        assertTrue(e.getMessage().contains(message), e.getMessage());

        Config tcp = DexNodes.config(ConfigFactory.parseString(key + " = \"" + value + "\"\ndex.fabric.transport = tcp"));
        assertEquals("tcp", DexSettings.from(tcp).fabric().transport(), "disni settings do not concern another fabric");
    }

    @Test
    void eachRoleFileGivesItsRole() {
        Config base = DexNodes.config(ConfigFactory.empty());
        for (String role : List.of("memory", "compute", "client")) {
            Config node = DexNodes.nodeConfig(base, role, "127.0.0.1", 0, List.of("127.0.0.1:2551"));
            // Memory and compute nodes vote in the split-brain resolver's majority; clients do not.
            assertEquals(role.equals("client") ? List.of(role) : List.of(role, "voter"), node.getStringList("pekko.cluster.roles"));
            assertEquals(List.of("pekko://dex@127.0.0.1:2551"), node.getStringList("pekko.cluster.seed-nodes"));
        }
        assertThrows(IllegalArgumentException.class, () -> DexNodes.nodeConfig(base, "storage", "127.0.0.1", 0, List.of()));
    }

    /**
     * Least exposure: a node started without --host listens on the loopback address only, the cluster's port and a
     * memory node's fabric server alike; --host moves both, and an explicit fabric host stays as set.
     */
    @Test
    void aNodeListensOnLoopbackUnlessHostSaysOtherwise() {
        NodeOptions plain = new NodeOptions();
        new picocli.CommandLine(plain).parseArgs("--fabric", "tcp");
        Config node = plain.nodeConfig(ConfigFactory.empty(), "memory");
        assertEquals("127.0.0.1", node.getString("pekko.remote.artery.canonical.hostname"));
        String bind = node.getString("pekko.remote.artery.bind.hostname");
        assertTrue(bind.isEmpty() || bind.equals("127.0.0.1"), "Artery binds where it is reached: '" + bind + "'");
        assertEquals("127.0.0.1", node.getString("dex.fabric.tcp.host"));
        assertEquals("127.0.0.1", node.getString("dex.fabric.disni.host"));

        NodeOptions moved = new NodeOptions();
        new picocli.CommandLine(moved).parseArgs("--fabric", "tcp", "--host", "192.0.2.7", "--set", "dex.fabric.disni.host=192.0.2.8");
        Config elsewhere = moved.nodeConfig(ConfigFactory.empty(), "memory");
        assertEquals("192.0.2.7", elsewhere.getString("pekko.remote.artery.canonical.hostname"));
        assertEquals("192.0.2.7", elsewhere.getString("dex.fabric.tcp.host"));
        assertEquals("192.0.2.8", elsewhere.getString("dex.fabric.disni.host"));
    }

    /**
     * Every default of a node's options is written once, in reference.conf (dex.node.*): an option not given takes
     * the setting, which --set and --config change; a fabric chosen with --set dex.fabric.transport is kept (the
     * option's own default used to override it), and an option still wins over every setting.
     */
    @Test
    void aNodesOptionsDefaultToTheirSettings() {
        NodeOptions plain = new NodeOptions();
        new picocli.CommandLine(plain).parseArgs();
        Config node = plain.nodeConfig(ConfigFactory.empty(), "compute");
        Config reference = ConfigFactory.defaultReference();
        assertEquals(reference.getString("dex.node.fabric"), node.getString("dex.fabric.transport"));
        assertEquals("shm", node.getString("dex.fabric.transport"), "a node process does not default to the JVM-local fabric");
        assertEquals(reference.getString("dex.node.host"), node.getString("pekko.remote.artery.canonical.hostname"));
        assertEquals(reference.getInt("dex.node.port"), node.getInt("pekko.remote.artery.canonical.port"));

        NodeOptions set = new NodeOptions();
        new picocli.CommandLine(set).parseArgs("--set", "dex.fabric.transport=tcp", "--set", "dex.node.host=192.0.2.9",
                "--set", "dex.node.port=25999");
        Config changed = set.nodeConfig(ConfigFactory.empty(), "compute");
        assertEquals("tcp", changed.getString("dex.fabric.transport"));
        assertEquals("192.0.2.9", changed.getString("pekko.remote.artery.canonical.hostname"));
        assertEquals(25999, changed.getInt("pekko.remote.artery.canonical.port"));

        NodeOptions both = new NodeOptions();
        new picocli.CommandLine(both).parseArgs("--fabric", "local", "--set", "dex.fabric.transport=tcp", "--port", "25998",
                "--set", "dex.node.port=25999");
        Config options = both.nodeConfig(ConfigFactory.empty(), "compute");
        assertEquals("local", options.getString("dex.fabric.transport"), "the option wins");
        assertEquals(25998, options.getInt("pekko.remote.artery.canonical.port"));

        NodeOptions bad = new NodeOptions();
        new picocli.CommandLine(bad).parseArgs("--set", "dex.node.port=70000");
        IllegalArgumentException refused = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                bad::overrides);
        assertTrue(refused.getMessage().contains("70000"), refused.getMessage());
    }

    /**
     * The demo's memory node holds the tree and one redo log per partition: with 200,000 keys, a region sized for
     * the tree alone (64 MiB) was filled by the 64 logs, and partitions could not be acquired (MemoryFullException).
     */
    @Test
    void theDemosRegionHoldsTheTreeAndEveryPartitionsLog() {
        Config defaults = DexNodes.config(ConfigFactory.empty());
        long logsMiB = 64 * (defaults.getBytes("dex.compute.redo-log-size") >> 20);
        for (long keys : new long[] {1_000, 200_000, 1_000_000, 10_000_000}) {
            long treeMiB = keys * 96 >> 20;
            long region = DemoCluster.regionMiB(keys, 64, defaults);
            assertTrue(region > treeMiB + logsMiB, keys + " keys: a region of " + region + " MiB holds a tree of " + treeMiB
                    + " MiB and " + logsMiB + " MiB of logs with room to spare");
        }
    }

    @Test
    void seedNodesAreHostAndPort() {
        assertEquals("pekko://dex@10.0.0.1:2551", DexNodes.seedAddress("10.0.0.1:2551"));
        for (String bad : List.of("localhost", "host:", ":2551", "host:70000", "host:x")) {
            assertThrows(IllegalArgumentException.class, () -> DexNodes.seedAddress(bad), bad);
        }
    }

    /**
     * A demo JVM with more compute nodes than {@link DemoCluster#CROWDED} allows heartbeat pauses and waits of 10 s (with
     * the cluster's 2 s and 3 s, 16 nodes in one JVM on two cores downed themselves while forming); up to that it keeps
     * the cluster's settings, and a value the user set wins either way.
     */
    @Test
    void aCrowdedDemoJvmToleratesLongerPausesUnlessTheUserSaysOtherwise() {
        com.typesafe.config.Config base = DexNodes.config(com.typesafe.config.ConfigFactory.empty());
        com.typesafe.config.Config none = com.typesafe.config.ConfigFactory.empty();

        assertEquals(base, DemoCluster.forCrowdedJvm(base, DemoCluster.CROWDED, none), "up to the limit, the cluster's own");
        com.typesafe.config.Config crowded = DemoCluster.forCrowdedJvm(base, 17, none);
        assertEquals(java.time.Duration.ofSeconds(10), crowded.getDuration(DemoCluster.HEARTBEAT_PAUSE));
        assertEquals(java.time.Duration.ofSeconds(10), crowded.getDuration(DemoCluster.STABLE_AFTER));
        assertEquals(java.time.Duration.ofSeconds(2), base.getDuration(DemoCluster.HEARTBEAT_PAUSE), "the cluster's own setting");
        assertEquals(base.getDuration("pekko.cluster.gossip-interval"), crowded.getDuration("pekko.cluster.gossip-interval"),
                "nothing else changes");
        // Beyond VERY_CROWDED the fast ticks go back to Pekko's defaults as well, each unless the user set it.
        com.typesafe.config.Config userTick = com.typesafe.config.ConfigFactory.parseString("pekko.cluster.gossip-interval = 300ms");
        com.typesafe.config.Config veryCrowded = DemoCluster.forCrowdedJvm(userTick.withFallback(base), DemoCluster.VERY_CROWDED + 1,
                userTick);
        assertEquals(java.time.Duration.ofMillis(300), veryCrowded.getDuration("pekko.cluster.gossip-interval"), "the user's value");
        assertEquals(java.time.Duration.ofSeconds(1), veryCrowded.getDuration("pekko.cluster.leader-actions-interval"));
        assertEquals(java.time.Duration.ofSeconds(10), veryCrowded.getDuration(DemoCluster.HEARTBEAT_PAUSE), "the tiers add up");
        com.typesafe.config.Config pekko = com.typesafe.config.ConfigFactory.defaultReference().resolve();
        for (var tick : DemoCluster.PEKKO_TICKS.entrySet()) {
            com.typesafe.config.Config ticks = DemoCluster.forCrowdedJvm(base, DemoCluster.VERY_CROWDED + 1, none);
            assertEquals(pekko.getDuration(tick.getKey()), ticks.getDuration(tick.getKey()), tick.getKey() + ": Pekko's default");
            assertTrue(base.getDuration(tick.getKey()).compareTo(ticks.getDuration(tick.getKey())) < 0,
                    tick.getKey() + " is faster in dex-cluster.conf: " + base.getDuration(tick.getKey()));
        }
        assertEquals(base.getDuration("pekko.cluster.gossip-interval"), DemoCluster.forCrowdedJvm(base, DemoCluster.VERY_CROWDED, none)
                .getDuration("pekko.cluster.gossip-interval"), "up to VERY_CROWDED the ticks stay");

        com.typesafe.config.Config user = com.typesafe.config.ConfigFactory.parseString(DemoCluster.STABLE_AFTER + " = 4s");
        com.typesafe.config.Config chosen = DemoCluster.forCrowdedJvm(user.withFallback(base), 17, user);
        assertEquals(java.time.Duration.ofSeconds(4), chosen.getDuration(DemoCluster.STABLE_AFTER), "the user's value");
        assertEquals(java.time.Duration.ofSeconds(10), chosen.getDuration(DemoCluster.HEARTBEAT_PAUSE));
        // Set through a substitution that only the full configuration resolves: still the user's.
        com.typesafe.config.Config substituted = com.typesafe.config.ConfigFactory.parseString(
                DemoCluster.STABLE_AFTER + " = ${dex.demo.user-stable-after}");
        assertEquals(base.getDuration(DemoCluster.STABLE_AFTER),
                DemoCluster.forCrowdedJvm(base, 17, substituted).getDuration(DemoCluster.STABLE_AFTER));
    }
}
