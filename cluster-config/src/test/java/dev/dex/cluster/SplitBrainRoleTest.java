package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.apache.pekko.actor.Address;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.UniqueAddress;
import org.apache.pekko.cluster.sbr.DowningStrategy;
import org.apache.pekko.cluster.sbr.KeepMajority;
import org.apache.pekko.cluster.sbr.SplitBrainResolverSettings;
import org.apache.pekko.util.Version;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import scala.Option;

/**
 * The split-brain resolver, as the cluster configures it, counts memory and compute nodes and no clients
 * (docs/replication.md, "Downing"): Pekko's own decision logic (its resolver's keep-majority strategy) with the role it
 * reads from our configuration, given to members with the roles our role files give them, in the cases the downing
 * strategy is made for, each against what the other choices would decide.
 */
class SplitBrainRoleTest {
    private static final DowningStrategy.Decision STAYS = DowningStrategy.DownUnreachable$.MODULE$;
    private static final DowningStrategy.Decision DOWNS_ITSELF = DowningStrategy.DownReachable$.MODULE$;

    private int port;
    private Option<String> configured;

    @BeforeEach
    void readTheConfiguration() {
        SplitBrainResolverSettings settings = new SplitBrainResolverSettings(DexNodes.config(ConfigFactory.empty()));
        assertEquals("keep-majority", settings.DowningStrategy());
        configured = settings.keepMajorityRole();
        assertEquals(Option.apply("voter"), configured);
        port = 25_520;
    }

    /** A member that is up, with the roles {@code dex-<kind>.conf} gives it. */
    private Member up(String kind) {
        Config roleFile = ConfigFactory.parseResources("dex-" + kind + ".conf");
        java.util.Set<String> roles = new java.util.HashSet<>(roleFile.getStringList("pekko.cluster.roles"));
        roles.add("dc-default");
        UniqueAddress address = new UniqueAddress(new Address("pekko", DexNodes.SYSTEM, "127.0.0.1", port), port);
        port++;
        return org.apache.pekko.cluster.Member$.MODULE$.apply(address, scala.jdk.javaapi.CollectionConverters.asScala(roles).toSet(),
                Version.Zero()).copyUp(port);
    }

    /** What {@code self}'s side decides, with {@code side} reachable from it and {@code cutOff} not. */
    private static DowningStrategy.Decision decide(Option<String> role, Member self, List<Member> side, List<Member> cutOff) {
        KeepMajority strategy = new KeepMajority("default", role, self.uniqueAddress());
        strategy.add(self);
        side.forEach(strategy::add);
        for (Member member : cutOff) {
            strategy.add(member);
            strategy.addUnreachable(member);
        }
        return strategy.decide();
    }

    @Test
    void onlyMemoryAndComputeNodesVote() {
        assertTrue(up("memory").hasRole("voter") && up("compute").hasRole("voter"));
        assertTrue(!up("client").hasRole("voter"), "clients do not vote");
    }

    @Test
    void theComputeNodesStayWhenTheOnlyMemoryNodeIsUnreachable() {
        Member memory = up("memory");
        Member computeA = up("compute");
        List<Member> side = List.of(up("compute"), up("client"));
        assertEquals(STAYS, decide(configured, computeA, side, List.of(memory)), "the compute nodes down the memory node, not themselves");
        assertEquals(DOWNS_ITSELF, decide(Option.apply("memory"), computeA, side, List.of(memory)),
                "counting memory nodes alone (the strategy before) downed every compute node and client when it restarted");
    }

    @Test
    void theOtherComputeNodeStaysWhenTheOldestOfTwoCrashes() {
        Member memory = up("memory");
        Member crashed = up("compute");
        Member survivor = up("compute");
        List<Member> side = List.of(memory, up("client"));
        assertEquals(STAYS, decide(configured, survivor, side, List.of(crashed)), "the memory node breaks the tie of two compute nodes");
        assertEquals(DOWNS_ITSELF, decide(Option.apply("compute"), survivor, side, List.of(crashed)),
                "counting compute nodes alone, a crash of the one with the lower address would down the whole cluster");
    }

    @Test
    void aMemoryNodeCutOffFromTheComputeNodesDownsItself() {
        Member memory = up("memory");
        assertEquals(DOWNS_ITSELF, decide(configured, memory, List.of(), List.of(up("compute"), up("compute"), up("client"))),
                "it downs itself (and its process rejoins with a new actor system, keeping its region)");
    }

    @Test
    void theSideWithMoreNodesStaysHoweverManyClientsTheOtherHas() {
        Member memory = up("memory");
        List<Member> side = List.of(up("compute"));
        List<Member> away = List.of(up("compute"), up("client"), up("client"), up("client"));
        assertEquals(STAYS, decide(configured, memory, side, away), "a memory and a compute node outvote one compute node");
        assertEquals(DOWNS_ITSELF, decide(Option.empty(), memory, side, away),
                "with every member counted, the clients' side would win and down the memory node and a compute node");
    }

    @Test
    void aTieGoesToTheSideWithTheLowestAddress() {
        Member lowest = up("memory");
        Member computeA = up("compute");
        Member memoryB = up("memory");
        Member computeB = up("compute");
        assertEquals(STAYS, decide(configured, computeA, List.of(lowest), List.of(memoryB, computeB)));
        assertEquals(DOWNS_ITSELF, decide(configured, computeB, List.of(memoryB), List.of(lowest, computeA)));
    }
}
