package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.EnumSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.rdma.FaultPlan.Kind;

/** The operator's RATE[:KINDS], the builder's ranges and the filters of a {@link FaultPlan}. */
class FaultPlanTest {

    @Test
    void aRateAloneFailsEveryKindOfVerb() {
        FaultPlan plan = FaultPlan.parse("0.001");
        assertEquals(0.001, plan.rate());
        assertEquals(EnumSet.allOf(Kind.class), plan.kinds());
        assertEquals(FaultPlan.ANY_SERVER, plan.serverId());
        assertEquals(FaultPlan.DEFAULT_APPLY_FIRST, plan.applyFirst());
        assertEquals("0.001", plan.toString());
    }

    @Test
    void kindsAfterTheColonRestrictTheVerbs() {
        FaultPlan plan = FaultPlan.parse("0.01:write, CAS");
        assertEquals(0.01, plan.rate());
        assertEquals(EnumSet.of(Kind.WRITE, Kind.CAS), plan.kinds());
        assertEquals("0.01:write,cas", plan.toString());
        assertTrue(plan.matches(Kind.WRITE, GlobalAddress.of(3, 64)));
        assertTrue(!plan.matches(Kind.READ, GlobalAddress.of(3, 64)));
    }

    @Test
    void theBoundsOfTheRateAreAccepted() {
        assertEquals(0, FaultPlan.parse("0").rate());
        assertEquals(1, FaultPlan.parse("1:faa").rate());
        assertEquals(0.001, FaultPlan.parse("1e-3").rate());
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "''            | empty fault plan",
            "'   '         | empty fault plan",
            "abc           | fault rate 'abc' in 'abc' is not a number",
            "NaN:write     | fault rate 'NaN' in 'NaN:write' is not a number",
            "0.5d          | is not a number",
            "1.5           | fault rate 1.5 in '1.5' is outside [0, 1]",
            "-0.1:read     | fault rate -0.1 in '-0.1:read' is outside [0, 1]",
            "0.1:          | no verb kinds after ':' in '0.1:'",
            "0.1:write,,cas | an empty verb kind in '0.1:write,,cas'",
            "0.1:write,    | an empty verb kind",
            "0.1:writes    | unknown verb kind 'writes' in '0.1:writes': expected read, write, cas or faa",
            ":write        | fault rate '' in ':write' is not a number",
    })
    void badPlansAreRefusedWithWhatIsWrong(String spec, String message) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FaultPlan.parse(spec));
        assertTrue(e.getMessage().contains(message), e.getMessage());
    }

    @Test
    void theBuilderRefusesValuesOutsideTheirRanges() {
        FaultPlan none = FaultPlan.none();
        assertThrows(IllegalArgumentException.class, () -> none.withRate(1.01));
        assertThrows(IllegalArgumentException.class, () -> none.withRate(Double.NaN));
        assertThrows(IllegalArgumentException.class, () -> none.withNthVerb(-1));
        assertThrows(IllegalArgumentException.class, () -> none.withKinds(EnumSet.noneOf(Kind.class)));
        assertThrows(IllegalArgumentException.class, () -> none.withServer(GlobalAddress.MAX_SERVER_ID + 1));
        assertThrows(IllegalArgumentException.class, () -> none.withDelayNanos(-1));
        assertThrows(IllegalArgumentException.class, () -> none.withApplyFirst(2));
    }

    @Test
    void theServerFilterMatchesOnlyThatServersAddresses() {
        FaultPlan plan = FaultPlan.none().withServer(2);
        assertTrue(plan.matches(Kind.READ, GlobalAddress.of(2, 4096)));
        assertTrue(!plan.matches(Kind.READ, GlobalAddress.of(1, 4096)));
        assertEquals("0, memory server 2", plan.toString());
    }
}
