#!/bin/sh
# certs.sh DIR: throwaway TLS material for the mail tests, made with the
# openssl command line (EC P-256 keys, valid 7 days):
#   ca.pem, ca.key           a private test CA
#   server.pem, server.key   signed by it, for 127.0.0.1, ::1 and localhost
#   wrong.pem, wrong.key     signed by it, for wrong.example only (wrong host)
#   unknown.pem, unknown.key self-signed, for 127.0.0.1 and localhost (unknown CA)
# Idempotent: when every file is there and server.pem still verifies against
# ca.pem, nothing is made again.  Quiet unless something fails.
set -eu
dir=${1:?usage: certs.sh DIR}
mkdir -p "$dir"
cd "$dir"

all="ca.pem ca.key server.pem server.key wrong.pem wrong.key unknown.pem unknown.key"
have=1
for f in $all; do [ -s "$f" ] || have=0; done
if [ "$have" = 1 ] && openssl verify -CAfile ca.pem server.pem >/dev/null 2>&1 &&
   openssl x509 -checkend 3600 -noout -in server.pem >/dev/null 2>&1; then
	exit 0
fi

umask 077
tmp=$(mktemp -d ./.certs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
days=7

# the CA
openssl req -x509 $ec -keyout "$tmp/ca.key" -out "$tmp/ca.pem" -days $days \
	-subj "/CN=Stagedoor test CA" \
	-addext "basicConstraints=critical,CA:TRUE" \
	-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# leaf NAME SAN: a key and a certificate signed by the CA
leaf() {
	printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
		"$2" >"$tmp/$1.ext"
	openssl req -new $ec -keyout "$tmp/$1.key" -out "$tmp/$1.csr" \
		-subj "/CN=$1" 2>/dev/null
	openssl x509 -req -in "$tmp/$1.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
		-set_serial "0x$(openssl rand -hex 8)" -days $days \
		-extfile "$tmp/$1.ext" -out "$tmp/$1.pem" 2>/dev/null
}
leaf server "IP:127.0.0.1,IP:::1,DNS:localhost"
leaf wrong "DNS:wrong.example"

# self-signed for the right names: only the issuer is unknown
openssl req -x509 $ec -keyout "$tmp/unknown.key" -out "$tmp/unknown.pem" -days $days \
	-subj "/CN=Unknown test server" \
	-addext "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" 2>/dev/null

# keys are readable by the owner only; certificates by anyone
chmod 644 "$tmp"/*.pem
for f in $all; do mv -f "$tmp/$f" "$f"; done
