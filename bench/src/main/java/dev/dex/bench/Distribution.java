package dev.dex.bench;

import java.util.Arrays;
import java.util.Iterator;

/** How operations pick keys: Zipf-skewed (hot keys scattered over the key space) or uniform. */
enum Distribution {
    ZIPF("zipf"),
    UNIFORM("uniform");

    private final String cliName;

    Distribution(String cliName) {
        this.cliName = cliName;
    }

    String cliName() {
        return cliName;
    }

    static Distribution fromCliName(String name) {
        return CliNames.find(values(), Distribution::cliName, name, "distribution");
    }

    static final class Names implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return Arrays.stream(values()).map(Distribution::cliName).iterator();
        }
    }
}
