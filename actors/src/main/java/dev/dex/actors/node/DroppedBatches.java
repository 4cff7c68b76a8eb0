package dev.dex.actors.node;

import java.util.ArrayList;
import java.util.List;

import org.apache.pekko.actor.AllDeadLetters;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.eventstream.EventStream;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;

/**
 * Answers the batches a compute node could not deliver, instead of leaving their clients to time out. When a
 * partition moves, its old node's sharding region drops the messages it buffered for it meanwhile ("Dropping
 * [1] buffered messages to shard [12] during hand off to avoid re-ordering"): with the clients' batches going
 * to the node's {@link dev.dex.actors.partition.PartitionRouter} and from there to that region, every scale-out
 * dropped a batch of about every moving partition, and each held its operations for the batch timeout (5 s), long
 * enough to stall a closed loop for seconds. What sharding drops, and what a stopped entity leaves in its mailbox,
 * goes to the dead letters, which this actor watches: each undelivered {@link Partition.Execute} is answered
 * {@link Ops#NOT_HELD} (nothing of it was applied), and its client sends it again shortly, to where the
 * partition is now.
 *
 * <p>Concurrency: an actor; it keeps no state.
 */
final class DroppedBatches {
    private DroppedBatches() {
    }

    /** Subscribes to the node's dead letters; {@code host} is the node's address, as answers name it. */
    static Behavior<AllDeadLetters> create(String host) {
        return Behaviors.setup(context -> {
            context.getSystem().eventStream().tell(new EventStream.Subscribe<>(AllDeadLetters.class, context.getSelf()));
            return Behaviors.receiveMessage(dead -> {
                Object message = dead.message();
                while (message instanceof AllDeadLetters wrapped) { // sharding's drops come as a DeadLetter of a Dropped
                    message = wrapped.message();
                }
                if (message instanceof Partition.Execute execute && execute.ops() != null && execute.replyTo() != null) {
                    execute.replyTo().tell(new Ops.Results(execute.batch(), notHeld(execute), host));
                }
                return Behaviors.same();
            });
        });
    }

    private static List<Ops.Result> notHeld(Partition.Execute execute) {
        Ops.Result result = Ops.Result.error(Ops.NOT_HELD, "the batch was not delivered (its partition was moving); nothing of it"
                + " was applied");
        List<Ops.Result> results = new ArrayList<>(execute.ops().size());
        for (int i = 0; i < execute.ops().size(); i++) {
            results.add(result);
        }
        return results;
    }
}
