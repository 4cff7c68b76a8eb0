#!/usr/bin/env bash
# Makes the key stores of the tcp fabric's TLS tests (TcpTlsTest), as `dex certs` does but with a validity of
# 100 years, so the committed fixtures do not expire: a CA "cluster" that signs nodes a and b, and a CA "other"
# that signs a stranger. Every store's password is dex-test-fixture (test data, not a secret).
set -euo pipefail
cd "$(dirname "$0")"
rm -f ./*.p12 ./*.crt ./*.csr
P=dex-test-fixture
kt() { keytool "$@" -storepass "$P"; }
for ca in cluster other; do
  kt -genkeypair -alias ca -dname "CN=$ca CA" -keyalg EC -groupname secp256r1 -validity 36500 -ext bc:c \
    -keystore "ca-$ca.p12" -storetype PKCS12 -keypass "$P"
  kt -exportcert -rfc -alias ca -keystore "ca-$ca.p12" -file "ca-$ca.crt"
  kt -importcert -noprompt -alias ca -file "ca-$ca.crt" -keystore "trust-$ca.p12" -storetype PKCS12
done
node() { # name ca
  kt -genkeypair -alias node -dname "CN=$1" -keyalg EC -groupname secp256r1 -validity 36500 -keystore "$1.p12" \
    -storetype PKCS12 -keypass "$P"
  kt -certreq -alias node -keystore "$1.p12" -file "$1.csr"
  kt -gencert -rfc -alias ca -keystore "ca-$2.p12" -infile "$1.csr" -outfile "$1.crt" -validity 36500 \
    -ext ku:c=digitalSignature,keyAgreement -ext eku=serverAuth,clientAuth
  kt -importcert -noprompt -alias ca -file "ca-$2.crt" -keystore "$1.p12"
  kt -importcert -alias node -file "$1.crt" -keystore "$1.p12"
  rm -f "$1.csr" "$1.crt"
}
node a cluster
node b cluster
node stranger other
rm -f ca-*.p12 ca-*.crt
