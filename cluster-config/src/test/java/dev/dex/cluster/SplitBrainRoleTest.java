package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;

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

import com.typesafe.config.ConfigFactory;

import scala.Option;

/**
 * The split-brain resolver, as the cluster configures it, decides by the compute nodes alone (docs/replication.md,
 * "Downing"): Pekko's own decision logic (its resolver's keep-majority strategy) with the role it reads from our
 * configuration, in the cases the downing strategy is made for, each against what the other choices would decide.
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
        assertEquals(Option.apply("compute"), configured);
        port = 25_520;
    }

    private Member up(String role) {
        UniqueAddress address = new UniqueAddress(new Address("pekko", DexNodes.SYSTEM, "127.0.0.1", port), port);
        port++;
        scala.collection.immutable.Set<String> roles = scala.jdk.javaapi.CollectionConverters.asScala(
                java.util.Set.of(role, "dc-default")).toSet();
        return org.apache.pekko.cluster.Member$.MODULE$.apply(address, roles, Version.Zero()).copyUp(port);
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
    void theComputeNodesStayWhenTheOnlyMemoryNodeIsUnreachable() {
        Member computeA = up("compute");
        List<Member> side = List.of(up("compute"), up("client"));
        List<Member> away = List.of(up("memory"));
        assertEquals(STAYS, decide(configured, computeA, side, away), "the compute nodes down the memory node, not themselves");
        assertEquals(DOWNS_ITSELF, decide(Option.apply("memory"), computeA, side, away),
                "counting memory nodes (the strategy before) downed every compute node and client when it restarted");
    }

    @Test
    void aMemoryNodeCutOffFromTheComputeNodesDownsItself() {
        Member memory = up("memory");
        assertEquals(DOWNS_ITSELF, decide(configured, memory, List.of(), List.of(up("compute"), up("compute"), up("client"))),
                "it downs itself (and its process rejoins with a new actor system, keeping its region)");
    }

    @Test
    void theSideWithMoreComputeNodesStaysHoweverManyClientsTheOtherHas() {
        Member memory = up("memory");
        List<Member> side = List.of(up("compute"), up("compute"));
        List<Member> away = List.of(up("compute"), up("client"), up("client"), up("client"));
        assertEquals(STAYS, decide(configured, memory, side, away), "two compute nodes outvote one, clients do not count");
        assertEquals(DOWNS_ITSELF, decide(Option.empty(), memory, side, away),
                "with every member counted, the clients' side would win and down both compute nodes and the memory node");
    }

    @Test
    void aTieOfComputeNodesGoesToTheSideWithTheLowestAddress() {
        Member lower = up("compute");
        Member memory = up("memory");
        Member higher = up("compute");
        assertEquals(STAYS, decide(configured, lower, List.of(memory), List.of(higher)));
        assertEquals(DOWNS_ITSELF, decide(configured, higher, List.of(), List.of(lower, memory)));
    }
}
