package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.actors.node.ComputeNode;

/**
 * What {@code bin/dex status} and the demos learn of the compute nodes: a node that is listed but does not answer (killed
 * or cut off, until the cluster removes it) is named as silent, and the others' statuses still come, after one short
 * wait for all of them.
 */
class ClusterMemberTest {
    private final ActorTestKit kit = ActorTestKit.create();

    @AfterEach
    void close() {
        kit.shutdownTestKit();
    }

    @Test
    void aComputeNodeThatDoesNotAnswerIsNamedSilentAndTheOthersAnswerAllTheSame() throws Exception {
        ComputeNode.Status answer = new ComputeNode.Status("pekko://dex@10.0.0.1:2552", List.of(3, 4), 1, 2, 0, 0, 1024, 0.5, 0,
                List.of(), List.of(), "", 0, List.of(), 0, 2, 0, 0);
        ActorRef<ComputeNode.Command> answering = kit.spawn(Behaviors.receiveMessage(command -> {
            if (command instanceof ComputeNode.GetStatus get) {
                get.replyTo().tell(answer);
            }
            return Behaviors.same();
        }), "answering");
        ActorRef<ComputeNode.Command> silent = kit.spawn(Behaviors.ignore(), "silent");
        ActorRef<ComputeNode.Command> alsoSilent = kit.spawn(Behaviors.ignore(), "also-silent");
        for (ActorRef<ComputeNode.Command> node : List.of(answering, silent, alsoSilent)) {
            kit.system().receptionist().tell(Receptionist.register(ComputeNode.KEY, node));
        }
        ClusterMember.ComputeAnswers answers;
        long deadline = System.nanoTime() + 10_000_000_000L;
        do { // the receptionist lists them shortly after they register
            answers = ClusterMember.computeAnswers(kit.system(), Duration.ofMillis(500));
        } while (answers.statuses().size() + answers.silent().size() < 3 && System.nanoTime() < deadline);
        long start = System.nanoTime();
        answers = ClusterMember.computeAnswers(kit.system(), Duration.ofSeconds(1));
        long tookMillis = (System.nanoTime() - start) / 1_000_000;
        assertEquals(List.of(answer), answers.statuses(), "the node that answers is reported");
        assertEquals(2, answers.silent().size(), "both silent nodes are named: " + answers.silent());
        assertTrue(tookMillis < 1_900, "the two silent nodes were waited for together (1 s), not one after the other (2 s): " + tookMillis + " ms");
    }
}
