package dev.dex.rdma.disni;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;

/**
 * The {@code disni} transport: reads and writes are one-sided RDMA READ and WRITE work requests through DiSNI;
 * compare-and-swap and fetch-and-add, and the regions themselves, belong to a <em>control</em> fabric (in
 * production the {@code tcp} fabric), because DiSNI 2.1 never passes an atomic work request's arguments to
 * the native side (docs/rdma-disni.md tells the details).
 *
 * <p>{@link #export} exports the region on the control fabric, registers each of its segments with the RDMA
 * device and listens for RDMA clients. The returned region's {@link ExportedRegion#endpoint() endpoint} is a
 * descriptor text with the RDMA address, each segment's remote address, rkey and length, and the control
 * fabric's own endpoint:
 * <pre>
 * disni:1;server=3;rdma=10.0.0.5:7471;shift=30;segments=0x7f3a00000000/0x1a2b/1073741824;control=10.0.0.5:7470
 * </pre>
 * A memory node advertises it; compute nodes pass it to {@link #connect(Map)}, which connects the control
 * fabric to the control endpoints and opens one RDMA connection per server. {@link #connect(int...)} connects
 * to regions this fabric object exported.
 *
 * <p>The JVM needs {@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED} and
 * {@code -Djava.library.path=} the directory of {@code libdisni.so}; {@link RdmaDevices} checks both and
 * the device.
 *
 * <p>This object owns the control fabric: {@link #close()} closes it, after the clients and regions this
 * fabric opened.
 *
 * <p>Concurrency: export and close are serialised on this object; connect runs concurrently with them and
 * with itself. A client connected while the fabric closes is closed and its connect fails.
 */
public final class DisniFabric implements Fabric {
    private final Fabric control;
    private final DisniSettings settings;
    private final RdmaTransport transport;
    private final Map<Integer, DisniRegion> regions = new ConcurrentHashMap<>();
    private final Set<DisniRemoteMemory> clients = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    /**
     * A fabric on this machine's RDMA device.
     *
     * @param control  carries atomics and owns the regions; closed with this fabric (left to the caller if this
     *                 constructor throws)
     * @param settings where to listen, timeouts and sizes
     * @throws IllegalStateException with {@link RdmaDevices#reason()} when this JVM cannot use RDMA
     */
    public DisniFabric(Fabric control, DisniSettings settings) {
        this(control, settings, deviceTransport(settings));
    }

    DisniFabric(Fabric control, DisniSettings settings, RdmaTransport transport) {
        this.control = Objects.requireNonNull(control, "control fabric");
        this.settings = Objects.requireNonNull(settings, "settings");
        this.transport = Objects.requireNonNull(transport, "transport");
    }

    private static RdmaTransport deviceTransport(DisniSettings settings) {
        Objects.requireNonNull(settings, "settings");
        if (!RdmaDevices.available()) {
            throw new IllegalStateException("the disni fabric cannot run in this JVM: " + RdmaDevices.reason());
        }
        return new DisniTransport(settings);
    }

    @Override
    public String transport() {
        return "disni";
    }

    /**
     * Exports the region on the control fabric and registers it for RDMA.
     *
     * @throws IllegalArgumentException     for bad lengths or a server id already exported
     * @throws dev.dex.rdma.FabricException when the RDMA device refuses the registration or the listener
     * @throws IllegalStateException        after {@link #close()}
     */
    @Override
    public synchronized ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        if (closed) {
            throw new IllegalStateException("this disni fabric is closed");
        }
        ExportedRegion base = control.export(serverId, regionLength, chunkLength);
        RdmaTransport.Registration registration = null;
        try {
            registration = transport.register(base.region());
            Region region = base.region();
            RdmaRegionDescriptor descriptor = new RdmaRegionDescriptor(serverId, registration.host(), registration.port(),
                    region.segmentShift(), registration.segments(), base.endpoint());
            DisniRegion exported = new DisniRegion(base, registration, descriptor);
            if (regions.putIfAbsent(serverId, exported) != null) {
                throw new IllegalArgumentException("memory server " + serverId + " already exported on this disni fabric");
            }
            return exported;
        } catch (RuntimeException e) {
            if (registration != null) {
                registration.close();
            }
            base.close();
            throw e;
        }
    }

    /**
     * Connects to regions this fabric object exported.
     *
     * @throws IllegalArgumentException when a server has no region on this fabric or cannot be reached
     */
    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        SortedMap<Integer, RdmaRegionDescriptor> servers = new TreeMap<>();
        for (int id : serverIds) {
            DisniRegion exported = regions.get(id);
            if (exported == null) {
                throw new IllegalArgumentException("memory server " + id + " has not exported a region on this disni fabric");
            }
            servers.put(id, exported.descriptor);
        }
        return open(servers);
    }

    /**
     * Connects to memory servers by the endpoints they advertise.
     *
     * @param endpoints each server's {@link ExportedRegion#endpoint()} on a {@code disni} fabric, by server id
     * @throws IllegalArgumentException when an endpoint is malformed or describes another server, or a server
     *                                  cannot be reached
     */
    @Override
    public RemoteMemory connect(Map<Integer, String> endpoints) {
        if (endpoints.isEmpty()) {
            throw new IllegalArgumentException("connect needs at least one memory server endpoint");
        }
        SortedMap<Integer, RdmaRegionDescriptor> servers = new TreeMap<>();
        for (Map.Entry<Integer, String> entry : endpoints.entrySet()) {
            Integer id = Objects.requireNonNull(entry.getKey(), "memory server id");
            RdmaRegionDescriptor descriptor;
            try {
                descriptor = RdmaRegionDescriptor.parse(entry.getValue());
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("endpoint of memory server " + id + ": " + e.getMessage(), e);
            }
            if (descriptor.serverId() != id) {
                throw new IllegalArgumentException("endpoint of memory server " + id + " describes memory server " + descriptor.serverId());
            }
            servers.put(id, descriptor);
        }
        return open(servers);
    }

    /** Closes the clients and regions this fabric opened, stops listening, then closes the control fabric. */
    @Override
    public void close() {
        List<AutoCloseable> toClose = new ArrayList<>();
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            toClose.addAll(clients);
            toClose.addAll(regions.values());
        }
        toClose.add(transport);
        toClose.add(control);
        RuntimeException failure = null;
        for (AutoCloseable resource : toClose) {
            try {
                resource.close();
            } catch (Exception e) {
                RuntimeException wrapped = e instanceof RuntimeException runtime ? runtime : new IllegalStateException(e);
                if (failure == null) {
                    failure = wrapped;
                } else {
                    failure.addSuppressed(wrapped);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    private RemoteMemory open(SortedMap<Integer, RdmaRegionDescriptor> servers) {
        if (closed) {
            throw new IllegalArgumentException("this disni fabric is closed");
        }
        Map<Integer, String> controlEndpoints = new TreeMap<>();
        servers.forEach((id, descriptor) -> controlEndpoints.put(id, descriptor.controlEndpoint()));
        RemoteMemory controlMemory = control.connect(controlEndpoints);
        OneSidedVerbs verbs = null;
        DisniRemoteMemory memory;
        try {
            verbs = transport.connect(servers.values());
            memory = new DisniRemoteMemory(servers, verbs, controlMemory, settings.maxTransfer(), clients::remove);
        } catch (RuntimeException e) {
            if (verbs != null) {
                verbs.close();
            }
            controlMemory.close();
            throw e;
        }
        clients.add(memory);
        if (closed) {
            memory.close();
            throw new IllegalArgumentException("this disni fabric is closed");
        }
        return memory;
    }

    /** A region exported on the control fabric and registered for RDMA. */
    private final class DisniRegion implements ExportedRegion {
        final RdmaRegionDescriptor descriptor;
        private final ExportedRegion base;
        private final RdmaTransport.Registration registration;
        private final String endpoint;
        private final AtomicBoolean released = new AtomicBoolean();

        DisniRegion(ExportedRegion base, RdmaTransport.Registration registration, RdmaRegionDescriptor descriptor) {
            this.base = base;
            this.registration = registration;
            this.descriptor = descriptor;
            this.endpoint = descriptor.encode();
        }

        @Override
        public int serverId() {
            return descriptor.serverId();
        }

        @Override
        public Region region() {
            return base.region();
        }

        /** The {@link RdmaRegionDescriptor} text of this region. */
        @Override
        public String endpoint() {
            return endpoint;
        }

        /** Removes the region from the fabric, deregisters its segments, then closes it on the control fabric. */
        @Override
        public void close() {
            if (released.compareAndSet(false, true)) {
                regions.remove(descriptor.serverId(), this);
                try {
                    registration.close();
                } finally {
                    base.close();
                }
            }
        }
    }
}
