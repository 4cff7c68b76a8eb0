package dev.dex.rdma.disni;

import static dev.dex.rdma.disni.DisniOneSidedVerbs.messageOf;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import com.ibm.disni.RdmaActiveEndpoint;
import com.ibm.disni.RdmaActiveEndpointGroup;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;

/**
 * A client's connection to one memory server. DiSNI's connect waits without bound for its connection
 * manager events and ignores the error events, so {@link #connectWithin} interrupts it on an error event or
 * when the connect timeout passes.
 *
 * <p>Concurrency: {@code failure} is written by verb threads and the connection-manager thread, first reason
 * wins in practice and any reason is a true one; the connect fields are guarded by {@code connectLock}.
 */
final class ClientEndpoint extends RdmaActiveEndpoint implements ChainPoster.Connection {
    final Semaphore credits;
    volatile String failure;
    private final DisniOneSidedVerbs owner;
    private final Object connectLock = new Object();
    private Thread connecting;
    private String connectFailure;

    ClientEndpoint(RdmaActiveEndpointGroup<ClientEndpoint> group, RdmaCmId id, boolean serverSide, DisniOneSidedVerbs owner,
                   int queueDepth) throws IOException {
        super(group, id, serverSide);
        this.owner = owner;
        this.credits = new Semaphore(queueDepth);
    }

    @Override
    public void dispatchCqEvent(IbvWC wc) {
        owner.complete(wc.getWr_id(), wc.getStatus());
    }

    @Override
    public synchronized void dispatchCmEvent(RdmaCmEvent event) throws IOException {
        int type = event.getEvent();
        if (type == RdmaCmEvent.EventType.RDMA_CM_EVENT_DISCONNECTED.ordinal()) {
            breakWith("the memory server disconnected");
        } else if (isError(type)) {
            String reason = RdmaCmEvent.EventType.values()[type].name() + " (status " + event.getStatus() + ")";
            breakWith(reason);
            abortConnect(reason);
        }
        super.dispatchCmEvent(event);
    }

    /**
     * Closes the connection. DiSNI 2.1 unregisters an active endpoint from its completion-queue processor
     * after releasing it, which fails for a connection that never got a queue pair (a connect that failed):
     * by then the endpoint is released and removed from its group, and there is nothing to unregister, so
     * that failure is dropped.
     */
    @Override
    public void close() throws IOException, InterruptedException {
        boolean hadQueuePair = getQp() != null;
        try {
            super.close();
        } catch (IOException | RuntimeException e) {
            if (hadQueuePair) {
                throw e;
            }
        }
    }

    @Override
    public Semaphore credits() {
        return credits;
    }

    @Override
    public String failure() {
        return failure;
    }

    @Override
    public void breakWith(String reason) {
        if (failure == null) {
            failure = reason;
        }
    }

    /** Connects, or fails with the connection manager's error event or after {@code timeout}. */
    void connectWithin(InetSocketAddress address, Duration timeout) throws IOException {
        int timeoutMs = (int) timeout.toMillis();
        synchronized (connectLock) {
            connecting = Thread.currentThread();
        }
        CompletableFuture<Void> watchdog = CompletableFuture.runAsync(
                () -> abortConnect("no connection within " + timeoutMs + " ms"),
                CompletableFuture.delayedExecutor(timeoutMs, TimeUnit.MILLISECONDS));
        try {
            connect(address, timeoutMs);
        } catch (Exception e) {
            String reason;
            synchronized (connectLock) {
                reason = connectFailure;
            }
            throw new IOException(reason != null ? reason : messageOf(e), e);
        } finally {
            watchdog.cancel(false);
            boolean aborted;
            synchronized (connectLock) {
                connecting = null;
                aborted = connectFailure != null;
            }
            if (aborted) {
                // abortConnect interrupted this thread to end DiSNI's wait; the interrupt is spent.
                Thread.interrupted();
            }
        }
    }

    private void abortConnect(String reason) {
        synchronized (connectLock) {
            if (connecting != null && connectFailure == null) {
                connectFailure = reason;
                connecting.interrupt();
            }
        }
    }

    private static boolean isError(int type) {
        return type == RdmaCmEvent.EventType.RDMA_CM_EVENT_ADDR_ERROR.ordinal()
                || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_ROUTE_ERROR.ordinal()
                || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_CONNECT_ERROR.ordinal()
                || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_UNREACHABLE.ordinal()
                || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_REJECTED.ordinal()
                || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_DEVICE_REMOVAL.ordinal();
    }
}
