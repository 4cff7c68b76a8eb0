package dev.dex.rdma;

import java.math.BigDecimal;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Which verbs a {@link FaultInjectingRemoteMemory} fails or delays, and how. Immutable: start from {@link #none()}
 * and add to it with the {@code with...} methods, or {@link #parse} an operator's {@code RATE[:KINDS]}.
 *
 * <p>A verb <em>matches</em> the plan when its kind is one of {@link #kinds()} and, if the plan names a memory
 * server, its address is on that server. A matching verb fails when it is the {@link #nthVerb() n-th} matching
 * verb, or when a draw at {@link #rate()} says so; it is delayed by {@link #delayNanos()} whether it fails or not.
 * A failing write or compare-and-swap is first applied in a {@link #applyFirst() fraction} of the cases, as a
 * verb whose answer was lost on the way back; every other failing verb fails before it reaches memory.
 */
public final class FaultPlan {
    /** A verb of the fabric, as {@code KINDS} names it. */
    public enum Kind {
        READ("read"),
        WRITE("write"),
        CAS("cas"),
        FAA("faa");

        private final String cliName;

        Kind(String cliName) {
            this.cliName = cliName;
        }

        /** Its name in {@code RATE[:KINDS]}. */
        public String cliName() {
            return cliName;
        }
    }

    /** The memory server filter that lets every server's verbs match. */
    public static final int ANY_SERVER = -1;
    /** Half of the failing writes and compare-and-swaps take effect before they fail: both outcomes get tested. */
    public static final double DEFAULT_APPLY_FIRST = 0.5;
    private static final String FORMAT = "expected RATE[:KINDS], a rate in [0, 1] and a comma list of read, write, cas, faa,"
            + " e.g. 0.001:write,cas";
    private static final FaultPlan NONE = new FaultPlan(0, 0, EnumSet.allOf(Kind.class), ANY_SERVER, 0, DEFAULT_APPLY_FIRST, 0, 1);

    private final double rate;
    private final long nthVerb;
    private final Set<Kind> kinds;
    private final int serverId;
    private final long delayNanos;
    private final double applyFirst;
    private final long seed;
    private final int burst;

    private FaultPlan(double rate, long nthVerb, Set<Kind> kinds, int serverId, long delayNanos, double applyFirst, long seed,
                      int burst) {
        this.burst = burst;
        this.rate = rate;
        this.nthVerb = nthVerb;
        this.kinds = Collections.unmodifiableSet(EnumSet.copyOf(kinds));
        this.serverId = serverId;
        this.delayNanos = delayNanos;
        this.applyFirst = applyFirst;
        this.seed = seed;
    }

    /** No fault, no delay: every kind of verb on every server matches, none fails. */
    public static FaultPlan none() {
        return NONE;
    }

    /**
     * The plan an operator writes as {@code RATE[:KINDS]}: each matching verb fails with probability RATE; KINDS is a
     * comma list of {@code read}, {@code write}, {@code cas} and {@code faa} (default: all four). Examples:
     * {@code 0.001}, {@code 0.01:write,cas}.
     *
     * @throws IllegalArgumentException naming what is wrong with {@code spec}
     */
    public static FaultPlan parse(String spec) {
        if (spec == null || spec.isBlank()) {
            throw new IllegalArgumentException("empty fault plan: " + FORMAT);
        }
        int colon = spec.indexOf(':');
        String rateText = (colon < 0 ? spec : spec.substring(0, colon)).strip();
        double rate;
        try {
            rate = new BigDecimal(rateText).doubleValue();
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("fault rate '" + rateText + "' in '" + spec + "' is not a number: " + FORMAT);
        }
        if (!(rate >= 0 && rate <= 1)) {
            throw new IllegalArgumentException("fault rate " + rateText + " in '" + spec + "' is outside [0, 1]");
        }
        FaultPlan plan = none().withRate(rate);
        if (colon < 0) {
            return plan;
        }
        String list = spec.substring(colon + 1);
        if (list.isBlank()) {
            throw new IllegalArgumentException("no verb kinds after ':' in '" + spec + "': " + FORMAT);
        }
        EnumSet<Kind> kinds = EnumSet.noneOf(Kind.class);
        for (String item : list.split(",", -1)) {
            String name = item.strip().toLowerCase(Locale.ROOT);
            if (name.isEmpty()) {
                throw new IllegalArgumentException("an empty verb kind in '" + spec + "': " + FORMAT);
            }
            kinds.add(Arrays.stream(Kind.values()).filter(k -> k.cliName.equals(name)).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("unknown verb kind '" + item.strip() + "' in '" + spec
                            + "': expected read, write, cas or faa")));
        }
        return plan.withKinds(kinds);
    }

    /** Each matching verb fails with probability {@code rate}, in [0, 1]. */
    public FaultPlan withRate(double rate) {
        if (!(rate >= 0 && rate <= 1)) {
            throw new IllegalArgumentException("fault rate " + rate + " outside [0, 1]");
        }
        return new FaultPlan(rate, nthVerb, kinds, serverId, delayNanos, applyFirst, seed, burst);
    }

    /** The {@code n}-th matching verb (from 1, counted over every thread) fails, once; 0: none. */
    public FaultPlan withNthVerb(long n) {
        if (n < 0) {
            throw new IllegalArgumentException("the failing verb is counted from 1 (0: none): " + n);
        }
        return new FaultPlan(rate, n, kinds, serverId, delayNanos, applyFirst, seed, burst);
    }

    /** Only verbs of these kinds match. */
    public FaultPlan withKinds(Kind first, Kind... more) {
        return withKinds(EnumSet.of(first, more));
    }

    /** Only verbs of these kinds match; at least one. */
    public FaultPlan withKinds(Set<Kind> kinds) {
        if (kinds.isEmpty()) {
            throw new IllegalArgumentException("a fault plan needs at least one verb kind");
        }
        return new FaultPlan(rate, nthVerb, kinds, serverId, delayNanos, applyFirst, seed, burst);
    }

    /** Only verbs on memory server {@code serverId} match; {@link #ANY_SERVER} for every server. */
    public FaultPlan withServer(int serverId) {
        if (serverId != ANY_SERVER && (serverId < 0 || serverId > GlobalAddress.MAX_SERVER_ID)) {
            throw new IllegalArgumentException("memory server id " + serverId + " outside [0, " + GlobalAddress.MAX_SERVER_ID + "]");
        }
        return new FaultPlan(rate, nthVerb, kinds, serverId, delayNanos, applyFirst, seed, burst);
    }

    /** Every matching verb waits {@code nanos} before it runs (or fails). */
    public FaultPlan withDelayNanos(long nanos) {
        if (nanos < 0) {
            throw new IllegalArgumentException("delay must be >= 0 ns: " + nanos);
        }
        return new FaultPlan(rate, nthVerb, kinds, serverId, nanos, applyFirst, seed, burst);
    }

    /** The fraction, in [0, 1], of failing writes and compare-and-swaps that take effect before they fail. */
    public FaultPlan withApplyFirst(double fraction) {
        if (!(fraction >= 0 && fraction <= 1)) {
            throw new IllegalArgumentException("apply-first fraction " + fraction + " outside [0, 1]");
        }
        return new FaultPlan(rate, nthVerb, kinds, serverId, delayNanos, fraction, seed, burst);
    }

    /**
     * Each fault is the first of {@code n} in a row: the next {@code n - 1} matching verbs of the same thread fail too
     * (an outage rather than a lost answer, so that code which tries a verb again still meets it); 1 by default.
     */
    public FaultPlan withBurst(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("a burst is at least one fault: " + n);
        }
        return new FaultPlan(rate, nthVerb, kinds, serverId, delayNanos, applyFirst, seed, n);
    }

    /** How many faults in a row each fault starts, on its thread. */
    public int burst() {
        return burst;
    }

    /** The seed the random draws start from. */
    public FaultPlan withSeed(long seed) {
        return new FaultPlan(rate, nthVerb, kinds, serverId, delayNanos, applyFirst, seed, burst);
    }

    public double rate() {
        return rate;
    }

    /** The matching verb that fails, counted from 1; 0 when none is chosen. */
    public long nthVerb() {
        return nthVerb;
    }

    public Set<Kind> kinds() {
        return kinds;
    }

    /** The memory server whose verbs match, or {@link #ANY_SERVER}. */
    public int serverId() {
        return serverId;
    }

    public long delayNanos() {
        return delayNanos;
    }

    public double applyFirst() {
        return applyFirst;
    }

    public long seed() {
        return seed;
    }

    /** Whether a verb of {@code kind} on {@code address} matches the plan's filters. */
    public boolean matches(Kind kind, long address) {
        return kinds.contains(kind) && (serverId == ANY_SERVER || GlobalAddress.serverId(address) == serverId);
    }

    /** The plan as {@code RATE[:KINDS]} (":KINDS" only when not every kind), then what else it sets. */
    @Override
    public String toString() {
        StringBuilder text = new StringBuilder(BigDecimal.valueOf(rate).stripTrailingZeros().toPlainString());
        if (kinds.size() < Kind.values().length) {
            text.append(':').append(kinds.stream().map(Kind::cliName).collect(Collectors.joining(",")));
        }
        if (nthVerb > 0) {
            text.append(", verb ").append(nthVerb);
        }
        if (serverId != ANY_SERVER) {
            text.append(", memory server ").append(serverId);
        }
        if (delayNanos > 0) {
            text.append(", delay ").append(delayNanos).append(" ns");
        }
        return text.toString();
    }
}
