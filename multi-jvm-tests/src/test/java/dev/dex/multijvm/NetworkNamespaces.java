package dev.dex.multijvm;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Emulated hosts for one test: each a Linux network namespace with one address, plugged into a bridge of its own in
 * the test's namespace, which has an address on the bridge too (the test JVM, the client, lives there). Traffic stays
 * between these namespaces; nothing is routed anywhere else. A host can be cut off from all the others by taking its
 * port of the bridge down ({@link #cut}) and plugged back in ({@link #heal}): TCP connections across the cut neither
 * fail nor get answers, as when a cable or a switch port fails.
 *
 * <p>Needs root and iproute2; {@link #create} throws {@link Unavailable} saying why where they are missing, for the
 * test to skip. {@link #close} deletes every namespace and the bridge (the processes in them must have ended), also
 * after a failure halfway through {@link #create}.
 */
final class NetworkNamespaces implements AutoCloseable {
    /** Namespaces cannot be made here (not root, no iproute2, no permission): the reason, for the test to skip. */
    static final class Unavailable extends Exception {
        private static final long serialVersionUID = 1L;

        Unavailable(String message) {
            super(message);
        }
    }

    /** One emulated host: its namespace, its address, and its port of the bridge (in the test's namespace). */
    record Host(String namespace, String address, String bridgePort) {
        /** The command prefix that runs a program in this host's namespace. */
        List<String> prefix() {
            return List.of("ip", "netns", "exec", namespace);
        }
    }

    private final String bridge;
    private final String rootAddress;
    private final List<Host> hosts = new ArrayList<>();
    private final List<String> namespaces = new ArrayList<>();
    private boolean bridgeMade;

    private NetworkNamespaces(String tag, int subnet) {
        this.bridge = "dxbr" + tag;
        this.rootAddress = "10.213." + subnet + ".1";
    }

    /** Makes {@code count} hosts on a subnet 10.213.k.0/24 no interface of this machine uses. */
    static NetworkNamespaces create(int count) throws Unavailable {
        if (!System.getProperty("os.name", "").toLowerCase().contains("linux")) {
            throw new Unavailable("network namespaces need Linux");
        }
        String tag = Integer.toHexString(0x1000 + ThreadLocalRandom.current().nextInt(0xefff));
        int subnet = 1 + ThreadLocalRandom.current().nextInt(250);
        String used = run(false, "ip", "-4", "addr");
        if (used == null) {
            throw new Unavailable("iproute2 (ip) is not available");
        }
        if (used.contains("10.213." + subnet + ".")) {
            subnet = (subnet % 250) + 1;
        }
        NetworkNamespaces made = new NetworkNamespaces(tag, subnet);
        try {
            made.make(tag, subnet, count);
        } catch (Unavailable | RuntimeException e) {
            made.close();
            throw e;
        }
        return made;
    }

    private void make(String tag, int subnet, int count) throws Unavailable {
        if (run(false, "ip", "link", "add", bridge, "type", "bridge") == null) {
            throw new Unavailable("cannot make a bridge (ip link add ... type bridge): root and CAP_NET_ADMIN are needed");
        }
        bridgeMade = true;
        must("ip", "addr", "add", rootAddress + "/24", "dev", bridge);
        must("ip", "link", "set", bridge, "up");
        for (int i = 0; i < count; i++) {
            String namespace = "dexit-" + tag + "-" + i;
            if (run(false, "ip", "netns", "add", namespace) == null) {
                throw new Unavailable("cannot make a network namespace (ip netns add): root is needed");
            }
            namespaces.add(namespace);
            String port = "dxv" + tag + i;
            String inside = "dxp" + tag + i;
            String address = "10.213." + subnet + "." + (10 + i);
            must("ip", "link", "add", port, "type", "veth", "peer", "name", inside);
            must("ip", "link", "set", inside, "netns", namespace);
            must("ip", "netns", "exec", namespace, "ip", "addr", "add", address + "/24", "dev", inside);
            must("ip", "netns", "exec", namespace, "ip", "link", "set", inside, "up");
            must("ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up");
            must("ip", "link", "set", port, "master", bridge);
            must("ip", "link", "set", port, "up");
            hosts.add(new Host(namespace, address, port));
        }
    }

    /** The test namespace's address on the bridge (where the test JVM's client binds). */
    String rootAddress() {
        return rootAddress;
    }

    Host host(int i) {
        return hosts.get(i);
    }

    int size() {
        return hosts.size();
    }

    /** Cuts {@code host} off from every other host and from the test's namespace. */
    void cut(Host host) {
        must("ip", "link", "set", host.bridgePort(), "down");
    }

    /** Plugs {@code host} back in. */
    void heal(Host host) {
        must("ip", "link", "set", host.bridgePort(), "up");
    }

    /** Deletes the namespaces (their veth pairs go with them) and the bridge; tries every one, whatever fails. */
    @Override
    public void close() {
        for (String namespace : namespaces) {
            run(false, "ip", "netns", "del", namespace);
        }
        namespaces.clear();
        if (bridgeMade) {
            run(false, "ip", "link", "del", bridge);
            bridgeMade = false;
        }
    }

    private static void must(String... command) {
        if (run(true, command) == null) {
            throw new IllegalStateException("failed: " + String.join(" ", command));
        }
    }

    /** Runs {@code command}; returns its output, or null when it could not run or exited with a failure. */
    private static String run(boolean report, String... command) {
        try {
            Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            byte[] output = process.getInputStream().readAllBytes();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                return null;
            }
            String text = new String(output, StandardCharsets.UTF_8);
            if (process.exitValue() != 0) {
                if (report) {
                    System.err.println(String.join(" ", command) + ": " + text.strip());
                }
                return null;
            }
            return text;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
