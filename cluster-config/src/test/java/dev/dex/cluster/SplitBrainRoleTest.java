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
import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

import scala.Option;

/**
 * The split-brain resolver, as the cluster configures it, decides a split by the memory nodes alone: a memory
 * node and a compute node on one side, another compute node and three clients on the other, the memory side stays
 * and downs the other. Pekko's default (every member counts) would down the memory node instead, the clients
 * outvoting it. Pekko's own decision logic (its resolver's strategy) with the settings it reads from our
 * configuration.
 */
class SplitBrainRoleTest {
    private int port = 25_520;

    private Member up(String role) {
        UniqueAddress address = new UniqueAddress(new Address("pekko", DexNodes.SYSTEM, "127.0.0.1", port), port);
        port++;
        scala.collection.immutable.Set<String> roles = scala.jdk.javaapi.CollectionConverters.asScala(
                java.util.Set.of(role, "dc-default")).toSet();
        return org.apache.pekko.cluster.Member$.MODULE$.apply(address, roles, Version.Zero()).copyUp(port);
    }

    private DowningStrategy.Decision decide(Option<String> role) {
        port = 25_520;
        Member memory = up("memory");
        Member computeWithIt = up("compute");
        List<Member> cutOff = List.of(up("compute"), up("client"), up("client"), up("client"));
        KeepMajority strategy = new KeepMajority("default", role, memory.uniqueAddress());
        strategy.add(memory);
        strategy.add(computeWithIt);
        for (Member member : cutOff) {
            strategy.add(member);
            strategy.addUnreachable(member);
        }
        return strategy.decide();
    }

    @Test
    void theSideWithTheMemoryNodesStaysHoweverManyClientsTheOtherHas() {
        SplitBrainResolverSettings settings = new SplitBrainResolverSettings(DexNodes.config(ConfigFactory.empty()));
        assertEquals("keep-majority", settings.DowningStrategy());
        assertEquals(Option.apply("memory"), settings.keepMajorityRole());
        assertEquals(DowningStrategy.DownUnreachable$.MODULE$, decide(settings.keepMajorityRole()),
                "the memory side downs the unreachable side");
        assertEquals(DowningStrategy.DownReachable$.MODULE$, decide(Option.empty()),
                "with every member counted, the clients' side would win and down the memory node");
    }
}
