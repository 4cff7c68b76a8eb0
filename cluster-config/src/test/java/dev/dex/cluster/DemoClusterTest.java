package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;

class DemoClusterTest {
    /**
     * The demo's nodes are actor systems named {@code dex} in one JVM, which Pekko counts equal (each is its user
     * guardian's reference: same local path, uid 0). The demo once removed a stopped compute node with
     * {@code List.remove} and so dropped the memory node from its list, which then never stopped.
     */
    @Test
    void removeSameRemovesThatSystemNotTheFirstOneEqualToIt() {
        ActorSystem<Void> first = ActorSystem.create(Behaviors.empty(), "dex");
        ActorSystem<Void> second = ActorSystem.create(Behaviors.empty(), "dex");
        try {
            // The trap itself: if Pekko ever tells them apart, List.remove would do and this helper could go.
            assertEquals(first, second, "two actor systems of one name are equal");
            List<ActorSystem<?>> systems = new ArrayList<>(List.of(first, second));
            DemoCluster.removeSame(systems, second);
            assertEquals(1, systems.size());
            assertSame(first, systems.get(0), "the first system stays in the list");
            assertThrows(IllegalStateException.class, () -> DemoCluster.removeSame(systems, second));
        } finally {
            first.terminate();
            second.terminate();
        }
    }
}
