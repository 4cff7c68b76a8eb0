package dev.dex.cluster;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * The certificates of a cluster's mutual TLS, made with the JDK's {@code keytool} (no other tool, nothing from the
 * network): a certificate authority of the cluster, and for each named node a PKCS12 key store with the node's
 * key and its certificate signed by that CA. Every node trusts exactly the CA ({@code truststore.p12}), so a
 * process with a certificate of another CA, or none, cannot join. Files, all owner-only:
 * <pre>
 *   ca.p12           the CA's key: keep it off the nodes (it signs new node certificates)
 *   ca.crt           the CA's certificate (PEM)
 *   truststore.p12   the CA's certificate, what every node trusts
 *   NAME.p12         a node's key and certificate chain (CN=NAME, EC P-256, 825 days)
 *   password         the password of every store above, one line
 * </pre>
 * {@code --tls DIR/NAME.p12} on a node command uses {@code NAME.p12} with the {@code truststore.p12} and
 * {@code password} beside it.
 */
final class Certs {
    static final String TRUST_STORE = "truststore.p12";
    static final String PASSWORD = "password";
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,62}");
    private static final String OWNER_ONLY = "rw-------";

    private Certs() {
    }

    /**
     * Makes a CA and one key store per name in {@code out} (created owner-only if missing; refused if it holds a CA
     * already, so a second run cannot silently replace the certificates a running cluster uses).
     */
    static void create(Path out, List<String> names, PrintWriter progress) throws IOException {
        if (names.isEmpty()) {
            throw new IllegalArgumentException("--nodes names no node");
        }
        for (String name : names) {
            if (!NAME.matcher(name).matches() || name.equals("ca") || name.equals("truststore")) {
                throw new IllegalArgumentException("node name '" + name + "': letters, digits, '.', '_' and '-', at most 63,"
                        + " and not 'ca' or 'truststore'");
            }
        }
        if (names.stream().distinct().count() != names.size()) {
            throw new IllegalArgumentException("--nodes names a node twice: " + names);
        }
        if (Files.exists(out.resolve("ca.p12"))) {
            throw new IllegalArgumentException(out + " holds a CA already (ca.p12): give another --out, or remove it first");
        }
        Files.createDirectories(out, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        String password = password();
        Path passwordFile = out.resolve(PASSWORD);
        Files.writeString(passwordFile, password + "\n", StandardCharsets.UTF_8);
        Files.setPosixFilePermissions(passwordFile, PosixFilePermissions.fromString(OWNER_ONLY));

        Path ca = out.resolve("ca.p12");
        Path caCert = out.resolve("ca.crt");
        keytool(password, "-genkeypair", "-alias", "ca", "-dname", "CN=DEX cluster CA", "-keyalg", "EC", "-groupname", "secp256r1",
                "-validity", "3650", "-ext", "bc:c", "-keystore", ca.toString(), "-storetype", "PKCS12");
        keytool(password, "-exportcert", "-rfc", "-alias", "ca", "-keystore", ca.toString(), "-file", caCert.toString());
        Path trust = out.resolve(TRUST_STORE);
        keytool(password, "-importcert", "-noprompt", "-alias", "ca", "-file", caCert.toString(), "-keystore", trust.toString(),
                "-storetype", "PKCS12");
        progress.println("certificate authority: " + ca + " (keep it off the nodes), " + caCert + ", " + trust);
        progress.flush();
        // Each node's five keytool runs are one after another; the nodes' are two at a time (each a JVM of its own, and
        // only reading the CA's store), which halves the wait for a cluster's certificates on two cores.
        java.util.concurrent.ExecutorService workers = java.util.concurrent.Executors.newFixedThreadPool(2);
        try {
            List<java.util.concurrent.Future<?>> nodes = new ArrayList<>();
            for (String name : names) {
                nodes.add(workers.submit(() -> {
                    nodeCertificate(password, out, name, ca, caCert);
                    synchronized (progress) {
                        progress.println("node " + name + ": " + out.resolve(name + ".p12"));
                        progress.flush();
                    }
                    return null;
                }));
            }
            for (java.util.concurrent.Future<?> node : nodes) {
                try {
                    node.get();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while the nodes' certificates were made", e);
                } catch (java.util.concurrent.ExecutionException e) {
                    if (e.getCause() instanceof IOException io) {
                        throw io;
                    }
                    throw new IOException("a node's certificate could not be made: " + e.getCause(), e.getCause());
                }
            }
        } finally {
            workers.shutdownNow();
        }
        try (var files = Files.list(out)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                Files.setPosixFilePermissions(file, PosixFilePermissions.fromString(OWNER_ONLY));
            }
        }
    }

    /** A node's key store: its key pair, signed by the CA, and the CA's certificate. */
    private static void nodeCertificate(String password, Path out, String name, Path ca, Path caCert) throws IOException {
        Path store = out.resolve(name + ".p12");
        Path request = out.resolve(name + ".csr");
        Path signed = out.resolve(name + ".crt");
        keytool(password, "-genkeypair", "-alias", "node", "-dname", "CN=" + name, "-keyalg", "EC", "-groupname", "secp256r1",
                "-validity", "825", "-keystore", store.toString(), "-storetype", "PKCS12");
        keytool(password, "-certreq", "-alias", "node", "-keystore", store.toString(), "-file", request.toString());
        keytool(password, "-gencert", "-rfc", "-alias", "ca", "-keystore", ca.toString(), "-infile", request.toString(),
                "-outfile", signed.toString(), "-validity", "825", "-ext", "ku:c=digitalSignature,keyAgreement",
                "-ext", "eku=serverAuth,clientAuth");
        keytool(password, "-importcert", "-noprompt", "-alias", "ca", "-file", caCert.toString(), "-keystore", store.toString());
        keytool(password, "-importcert", "-alias", "node", "-file", signed.toString(), "-keystore", store.toString());
        Files.delete(request);
        Files.delete(signed);
    }

    private static String password() {
        byte[] bytes = new byte[18];
        new SecureRandom().nextBytes(bytes);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    }

    /** Runs the JDK's keytool with the store (and key) password given on its standard input's stead. */
    private static void keytool(String password, String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        // A short-lived JVM each: the quick compiler and the serial collector start it faster than the defaults.
        command.addAll(List.of("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"));
        command.addAll(List.of(args));
        // -storepass:env keeps the password off the process list.
        command.addAll(List.of("-storepass:env", "DEX_TLS_PASSWORD"));
        if (List.of(args).contains("-genkeypair")) {
            command.addAll(List.of("-keypass:env", "DEX_TLS_PASSWORD"));
        }
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("DEX_TLS_PASSWORD", password);
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        try {
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new IOException("keytool " + args[0] + " did not finish within 60 s");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            throw new IOException("interrupted while keytool " + args[0] + " ran", e);
        }
        if (process.exitValue() != 0) {
            throw new IOException("keytool " + args[0] + " failed (exit " + process.exitValue() + "): " + output.strip());
        }
    }

    /** The password in {@code file}: its first line. */
    static String readPassword(Path file) {
        try {
            List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
            if (lines.isEmpty() || lines.get(0).isBlank()) {
                throw new IllegalArgumentException("the TLS password file " + file + " is empty");
            }
            return lines.get(0).strip();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the TLS password file " + file, e);
        }
    }
}
