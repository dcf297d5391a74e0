-- Wireshark dissector for the FORGIVE transport (UDP port 4793).
--
-- The byte layout is documented in docs/wire.md and wire/doc.go; this file
-- follows it field by field. Load it for one run with
--
--   tshark -X lua_script:deploy/wireshark/forgive.lua -r capture.pcap -V
--
-- or copy it into Wireshark's personal plugins directory
-- (~/.local/lib/wireshark/plugins/). Filter examples:
--
--   forgive.trimmed == 1                      trimmed DATA headers
--   forgive.flags.exhausted == 1              budget-exhausted reports
--   forgive.nack.reason == 0x01               NACKs of trimmed packets
--   forgive.ack.sacked_psn == 105             ACKs whose bitmap settles PSN 105
--   forgive.sealed == 1                       packets sealed by the security sublayer
--   forgive.tss.domain == 7                   packets sealed for security domain 7
--
-- forgive.trimmed and forgive.sealed are present (true or false) on every
-- packet, so a filter compares them with 1: the bare name matches all.
--
-- Sealed packets (docs/wire.md, "Security sublayer") show their plaintext
-- header, the domain id, the nonce and the header tag, and for DATA the
-- payload ciphertext and the payload tag. Without the domain's key nothing
-- is authenticated or decrypted: only the framing is checked.

local PORT = 4793
local VERSION = 2

local forgive = Proto("forgive", "FORGIVE transport")

local TYPE_DATA, TYPE_ACK, TYPE_NACK, TYPE_CNP, TYPE_PROBE, TYPE_PAUSE = 1, 2, 3, 4, 5, 6
local TYPE_CONNECT, TYPE_ACCEPT = 7, 8

local type_names = {
    [TYPE_DATA] = "DATA", [TYPE_ACK] = "ACK", [TYPE_NACK] = "NACK",
    [TYPE_CNP] = "CNP", [TYPE_PROBE] = "PROBE", [TYPE_PAUSE] = "PAUSE",
    [TYPE_CONNECT] = "CONNECT", [TYPE_ACCEPT] = "ACCEPT",
}

-- Header length of each type; DATA is followed by its payload.
local header_len = {
    [TYPE_DATA] = 40, [TYPE_ACK] = 40, [TYPE_NACK] = 40,
    [TYPE_CNP] = 24, [TYPE_PROBE] = 28, [TYPE_PAUSE] = 12,
    [TYPE_CONNECT] = 20, [TYPE_ACCEPT] = 20,
}

-- NACK reason codes follow the Ultra Ethernet PDS NACK codes.
local nack_reasons = {
    [0x01] = "Trimmed",
    [0x02] = "Trimmed at the last hop",
    [0x0B] = "PSN outside the receive window",
    [0x12] = "Packet not received (gap)",
    [0x1A] = "Receiver inferred loss (probe)",
}

local priorities = { [0] = "Normal", [1] = "High" }

local probe_kinds = { [1] = "Tail", [2] = "Retransmission", [3] = "Periodic" }

-- Flag bits (byte 1). DATA has its own; ACK and NACK share the feedback bits.
local DATA_FLAGS = 0x1F
local ACK_FLAGS = 0x1F
local NACK_FLAGS = 0x07
local F_TRIMMED = 0x10
-- The security sublayer's bit, in the flag byte of every type but PAUSE.
local F_SEALED = 0x80

-- The sublayer's extension after the header: domain id, nonce, header tag;
-- untrimmed DATA adds the payload tag after the ciphertext.
local SEAL_DOMAIN_LEN, SEAL_NONCE_LEN, SEAL_TAG_LEN = 4, 24, 16
local SEAL_EXT_LEN = SEAL_DOMAIN_LEN + SEAL_NONCE_LEN + SEAL_TAG_LEN

local f = forgive.fields
f.version     = ProtoField.uint8("forgive.version", "Version", base.DEC, nil, 0xF0)
f.type        = ProtoField.uint8("forgive.type", "Type", base.DEC, type_names, 0x0F)
f.flags       = ProtoField.uint8("forgive.flags", "Flags", base.HEX)
f.src         = ProtoField.uint16("forgive.src", "Source host", base.DEC)
f.dst         = ProtoField.uint16("forgive.dst", "Destination host", base.DEC)
f.entropy     = ProtoField.uint16("forgive.entropy", "Entropy", base.HEX)
f.flow        = ProtoField.uint32("forgive.flow", "Flow", base.DEC)
f.dst_tag     = ProtoField.uint32("forgive.dst_tag", "Destination tag", base.HEX)
f.src_tag     = ProtoField.uint32("forgive.src_tag", "Source tag", base.HEX)
f.psn         = ProtoField.uint32("forgive.psn", "PSN", base.DEC)
f.msg         = ProtoField.uint32("forgive.msg", "Message id", base.DEC)
f.offset      = ProtoField.uint32("forgive.offset", "Offset", base.DEC)
f.msg_len     = ProtoField.uint32("forgive.msg_len", "Message length", base.DEC)
f.payload_len = ProtoField.uint16("forgive.payload_len", "Payload length", base.DEC)
f.subflows    = ProtoField.uint8("forgive.subflows", "Subflows", base.DEC)
f.reserved    = ProtoField.bytes("forgive.reserved", "Reserved")
f.trimmed     = ProtoField.bool("forgive.trimmed", "Trimmed")
f.sealed      = ProtoField.bool("forgive.sealed", "Sealed")
f.sealed_flag = ProtoField.bool("forgive.flags.sealed", "Sealed by the security sublayer", 8, nil, F_SEALED)
f.encrypted   = ProtoField.bool("forgive.encrypted", "Payload encrypted")

-- The security sublayer.
f.tss_domain      = ProtoField.uint32("forgive.tss.domain", "Security domain", base.DEC)
f.tss_nonce       = ProtoField.bytes("forgive.tss.nonce", "Nonce")
f.tss_header_tag  = ProtoField.bytes("forgive.tss.header_tag", "Header tag")
f.tss_ciphertext  = ProtoField.bytes("forgive.tss.ciphertext", "Payload ciphertext (encrypted)")
f.tss_payload_tag = ProtoField.bytes("forgive.tss.payload_tag", "Payload tag")

-- DATA flags.
f.first   = ProtoField.bool("forgive.flags.first", "First packet of the message", 8, nil, 0x01)
f.last    = ProtoField.bool("forgive.flags.last", "Last packet of the message", 8, nil, 0x02)
f.retx    = ProtoField.bool("forgive.flags.retx", "Retransmission", 8, nil, 0x04)
f.ack_req = ProtoField.bool("forgive.flags.ack_req", "Acknowledge at once", 8, nil, 0x08)
f.trim    = ProtoField.bool("forgive.flags.trimmed", "Trimmed by a switch", 8, nil, F_TRIMMED)

-- ACK and NACK flags: the receiver's feedback, with the two FORGIVE flags.
f.ecn_echo  = ProtoField.bool("forgive.flags.ecn_echo", "ECN-Echo", 8, nil, 0x01)
f.eligible  = ProtoField.bool("forgive.flags.eligible", "Exemption-eligible (FORGIVE)", 8, nil, 0x02)
f.exhausted = ProtoField.bool("forgive.flags.exhausted", "Budget-exhausted (FORGIVE)", 8, nil, 0x04)
f.ack_retx  = ProtoField.bool("forgive.flags.ack_retx", "Acknowledges a retransmission", 8, nil, 0x08)
f.ack_probe = ProtoField.bool("forgive.flags.ack_probe", "Answers a probe", 8, nil, 0x10)

f.cum_psn    = ProtoField.uint32("forgive.ack.cum_psn", "Cumulative PSN", base.DEC)
f.sack_base  = ProtoField.uint32("forgive.ack.sack_base", "SACK base PSN", base.DEC)
f.sack       = ProtoField.uint64("forgive.ack.sack", "SACK bitmap", base.HEX)
f.sacked_psn = ProtoField.uint32("forgive.ack.sacked_psn", "Selectively acknowledged PSN", base.DEC)
f.echo_psn   = ProtoField.uint32("forgive.ack.echo_psn", "Echoed PSN", base.DEC)

f.reason   = ProtoField.uint8("forgive.nack.reason", "Reason", base.HEX, nack_reasons)
f.priority = ProtoField.uint8("forgive.nack.priority", "Priority", base.DEC, priorities)
f.count    = ProtoField.uint16("forgive.nack.count", "PSN count", base.DEC)
f.length   = ProtoField.uint32("forgive.nack.length", "Length", base.DEC)

f.kind    = ProtoField.uint8("forgive.probe.kind", "Kind", base.DEC, probe_kinds)
f.subflow = ProtoField.uint8("forgive.probe.subflow", "Subflow", base.DEC)

f.class_mask = ProtoField.uint8("forgive.pause.class_mask", "Class mask", base.HEX)
f.micros     = ProtoField.uint16("forgive.pause.micros", "Pause time (microseconds, 0 resumes)", base.DEC)
local class_bits = {}
for c = 0, 7 do
    class_bits[c] = ProtoField.bool("forgive.pause.class" .. c, "Class " .. c, 8, nil, bit32.lshift(1, c))
    f["class" .. c] = class_bits[c]
end

local ef_trimmed = ProtoExpert.new("forgive.trimmed.expert", "Payload trimmed by a switch",
    expert.group.SEQUENCE, expert.severity.NOTE)
local ef_malformed = ProtoExpert.new("forgive.malformed", "Malformed FORGIVE packet",
    expert.group.MALFORMED, expert.severity.ERROR)
forgive.experts = { ef_trimmed, ef_malformed }

local data_dissector = Dissector.get("data")

-- sealed_bit is F_SEALED while a sealed packet is dissected, else 0. The
-- header dissectors read byte 1 through octet, which hides the sealed bit,
-- so a sealed header reads as the plain header it was.
local sealed_bit = 0

local function octet(buf, i)
    local v = buf(i, 1):uint()
    if i == 1 then
        v = bit32.band(v, bit32.bnot(sealed_bit))
    end
    return v
end

-- malformed flags the packet and returns false, so a check reads
-- "ok = ok and check(...)".
local function malformed(tree, item, why)
    local target = item or tree
    target:add_proto_expert_info(ef_malformed, why)
    return false
end

local function check_reserved(buf, tree, from, len)
    local item = tree:add(f.reserved, buf(from, len))
    for i = 0, len - 1 do
        if octet(buf, from + i) ~= 0 then
            return malformed(tree, item, "Reserved byte " .. (from + i) .. " is not zero")
        end
    end
    return true
end

local function check_flags(buf, item, allowed, what)
    local undefined = bit32.band(octet(buf, 1), bit32.bnot(allowed))
    if undefined ~= 0 then
        return malformed(nil, item, string.format("Undefined %s flag bits 0x%02x", what, undefined))
    end
    return true
end

local function add_flags(buf, tree, fields)
    local item = tree:add(f.flags, buf(1, 1))
    for _, field in ipairs(fields) do
        item:add(field, buf(1, 1))
    end
    if sealed_bit ~= 0 then
        item:add(f.sealed_flag, buf(1, 1))
    end
    return item
end

-- add_sealed_flag shows the sealed bit of a type whose byte 1 is no flag
-- byte (CNP, PROBE, CONNECT, ACCEPT).
local function add_sealed_flag(buf, tree)
    if sealed_bit ~= 0 then
        tree:add(f.sealed_flag, buf(1, 1))
    end
end

-- add_tags shows the two flow tags every type but PAUSE carries at bytes
-- 12-19: the receiving end's tag, then the sending end's.
local function add_tags(buf, tree)
    tree:add(f.dst_tag, buf(12, 4))
    tree:add(f.src_tag, buf(16, 4))
end

local function dissect_data(buf, pinfo, tree, root)
    local flags_item = add_flags(buf, tree, { f.first, f.last, f.retx, f.ack_req, f.trim })
    check_flags(buf, flags_item, DATA_FLAGS, "DATA")
    tree:add(f.entropy, buf(2, 2))
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.flow, buf(8, 4))
    add_tags(buf, tree)
    tree:add(f.psn, buf(20, 4))
    tree:add(f.msg, buf(24, 4))
    tree:add(f.offset, buf(28, 4))
    tree:add(f.msg_len, buf(32, 4))
    tree:add(f.payload_len, buf(36, 2))
    tree:add(f.subflows, buf(38, 1))
    check_reserved(buf, tree, 39, 1)

    local trimmed = bit32.band(octet(buf, 1), F_TRIMMED) ~= 0
    local offset, n, msg_len = buf(28, 4):uint(), buf(36, 2):uint(), buf(32, 4):uint()
    local carried = buf:len() - 40
    if sealed_bit ~= 0 then
        -- The payload tag follows the ciphertext; check_length checked
        -- that the packet is as long as the header says.
        carried = buf:len() - 40 - SEAL_EXT_LEN
        if not trimmed then
            carried = carried - SEAL_TAG_LEN
        end
    end
    local item = tree:add(f.trimmed, trimmed)
    item:set_generated()
    if offset + n > msg_len then
        malformed(tree, nil, string.format("Range [%d,%d) beyond message length %d", offset, offset + n, msg_len))
    end
    local info = string.format("DATA flow=%d psn=%d msg=%d bytes=[%d,%d)",
        buf(8, 4):uint(), buf(20, 4):uint(), buf(24, 4):uint(), offset, offset + n)
    if trimmed then
        item:add_proto_expert_info(ef_trimmed,
            string.format("Trimmed: bytes [%d,%d) of message %d are missing", offset, offset + n, buf(24, 4):uint()))
        if carried ~= 0 then
            malformed(tree, nil, "Trimmed DATA carries " .. carried .. " payload bytes")
        end
        return info .. " TRIMMED"
    end
    if carried ~= n then
        malformed(tree, nil, string.format("Payload is %d bytes, header says %d", carried, n))
    end
    if sealed_bit ~= 0 then
        -- dissect_sealed shows the ciphertext; nothing can decode it.
        return info
    end
    if carried > 0 then
        data_dissector:call(buf(40):tvb(), pinfo, root)
    end
    return info
end

local function add_feedback_flags(buf, tree, fields, allowed, what)
    local item = add_flags(buf, tree, fields)
    check_flags(buf, item, allowed, what)
    local flags = octet(buf, 1)
    local tags = ""
    if bit32.band(flags, 0x02) ~= 0 then tags = tags .. " ELIGIBLE" end
    if bit32.band(flags, 0x04) ~= 0 then tags = tags .. " EXHAUSTED" end
    if bit32.band(flags, 0x01) ~= 0 then tags = tags .. " ECE" end
    return tags
end

local function dissect_ack(buf, pinfo, tree)
    local tags = add_feedback_flags(buf, tree,
        { f.ecn_echo, f.eligible, f.exhausted, f.ack_retx, f.ack_probe }, ACK_FLAGS, "ACK")
    check_reserved(buf, tree, 2, 2)
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.flow, buf(8, 4))
    add_tags(buf, tree)
    tree:add(f.cum_psn, buf(20, 4))
    tree:add(f.sack_base, buf(24, 4))
    local sack_item = tree:add(f.sack, buf(28, 8))
    tree:add(f.echo_psn, buf(36, 4))
    -- Bit i of the bitmap, counting from its least significant bit, settles
    -- PSN base+i. The 64 bits are read as two big-endian 32-bit halves.
    local base = buf(24, 4):uint()
    local halves = { [0] = buf(32, 4):uint(), [1] = buf(28, 4):uint() }
    for i = 0, 63 do
        local word = halves[math.floor(i / 32)]
        if bit32.band(word, bit32.lshift(1, i % 32)) ~= 0 then
            sack_item:add(f.sacked_psn, (base + i) % 4294967296):set_generated()
        end
    end
    return string.format("ACK flow=%d cum=%d sack=%d+0x%08x%08x%s",
        buf(8, 4):uint(), buf(20, 4):uint(), base, halves[1], halves[0], tags)
end

local function dissect_nack(buf, pinfo, tree)
    local tags = add_feedback_flags(buf, tree, { f.ecn_echo, f.eligible, f.exhausted }, NACK_FLAGS, "NACK")
    local reason = buf(2, 1):uint()
    local reason_item = tree:add(f.reason, buf(2, 1))
    if nack_reasons[reason] == nil then
        malformed(nil, reason_item, string.format("Unknown NACK reason 0x%02x", reason))
    end
    local prio_item = tree:add(f.priority, buf(3, 1))
    if buf(3, 1):uint() > 1 then
        malformed(nil, prio_item, "Unknown NACK priority " .. buf(3, 1):uint())
    end
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.flow, buf(8, 4))
    add_tags(buf, tree)
    tree:add(f.psn, buf(20, 4))
    tree:add(f.count, buf(24, 2))
    check_reserved(buf, tree, 26, 2)
    tree:add(f.msg, buf(28, 4))
    tree:add(f.offset, buf(32, 4))
    tree:add(f.length, buf(36, 4))
    local offset = buf(32, 4):uint()
    return string.format("NACK flow=%d reason=%s psn=%d count=%d bytes=[%d,%d)%s",
        buf(8, 4):uint(), nack_reasons[reason] or string.format("0x%02x", reason),
        buf(20, 4):uint(), buf(24, 2):uint(), offset, offset + buf(36, 4):uint(), tags)
end

local function dissect_cnp(buf, pinfo, tree)
    add_sealed_flag(buf, tree)
    check_reserved(buf, tree, 1, 3)
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.flow, buf(8, 4))
    add_tags(buf, tree)
    tree:add(f.psn, buf(20, 4))
    return string.format("CNP flow=%d psn=%d", buf(8, 4):uint(), buf(20, 4):uint())
end

local function dissect_probe(buf, pinfo, tree)
    add_sealed_flag(buf, tree)
    local kind = octet(buf, 1)
    local kind_item = tree:add(f.kind, buf(1, 1), kind)
    if probe_kinds[kind] == nil then
        malformed(nil, kind_item, "Unknown probe kind " .. kind)
    end
    tree:add(f.entropy, buf(2, 2))
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.flow, buf(8, 4))
    add_tags(buf, tree)
    tree:add(f.psn, buf(20, 4))
    local sub, subs = buf(24, 1):uint(), buf(25, 1):uint()
    local sub_item = tree:add(f.subflow, buf(24, 1))
    tree:add(f.subflows, buf(25, 1))
    if sub >= math.max(subs, 1) then
        malformed(nil, sub_item, string.format("Subflow %d of %d", sub, subs))
    end
    check_reserved(buf, tree, 26, 2)
    return string.format("PROBE flow=%d kind=%s psn=%d subflow=%d/%d",
        buf(8, 4):uint(), probe_kinds[kind] or tostring(kind), buf(20, 4):uint(), sub, subs)
end

local function dissect_pause(buf, pinfo, tree)
    check_reserved(buf, tree, 1, 1)
    local mask_item = tree:add(f.class_mask, buf(2, 1))
    for c = 0, 7 do
        mask_item:add(class_bits[c], buf(2, 1))
    end
    check_reserved(buf, tree, 3, 1)
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.micros, buf(8, 2))
    check_reserved(buf, tree, 10, 2)
    local micros = buf(8, 2):uint()
    if micros == 0 then
        return string.format("PAUSE classes=0x%02x resume", buf(2, 1):uint())
    end
    return string.format("PAUSE classes=0x%02x %d us", buf(2, 1):uint(), micros)
end

local function dissect_connect(buf, pinfo, tree)
    add_sealed_flag(buf, tree)
    check_reserved(buf, tree, 1, 3)
    tree:add(f.src, buf(4, 2))
    tree:add(f.dst, buf(6, 2))
    tree:add(f.flow, buf(8, 4))
    add_tags(buf, tree)
    local t = bit32.band(buf(0, 1):uint(), 0x0F)
    if buf(16, 4):uint() == 0 then
        malformed(tree, nil, type_names[t] .. " with source tag 0")
    end
    if t == TYPE_ACCEPT and buf(12, 4):uint() == 0 then
        malformed(tree, nil, "ACCEPT with destination tag 0")
    end
    return string.format("%s flow=%d tags=0x%08x/0x%08x", type_names[t],
        buf(8, 4):uint(), buf(12, 4):uint(), buf(16, 4):uint())
end

local dissectors = {
    [TYPE_DATA] = dissect_data, [TYPE_ACK] = dissect_ack, [TYPE_NACK] = dissect_nack,
    [TYPE_CNP] = dissect_cnp, [TYPE_PROBE] = dissect_probe, [TYPE_PAUSE] = dissect_pause,
    [TYPE_CONNECT] = dissect_connect, [TYPE_ACCEPT] = dissect_connect,
}

-- check_sealed_length verifies that a sealed datagram is as long as its
-- header says: header and extension, plus for untrimmed DATA the payload
-- and its tag.
local function check_sealed_length(buf, tree, t)
    local need, len = header_len[t] + SEAL_EXT_LEN, buf:len()
    local what = "Sealed " .. type_names[t]
    if len < need then
        return malformed(tree, nil, string.format("%s is %d bytes, need %d", what, len, need))
    end
    if t ~= TYPE_DATA then
        if len > need then
            return malformed(tree, nil, string.format("%s is %d bytes, want %d", what, len, need))
        end
        return true
    end
    local want = need
    if bit32.band(buf(1, 1):uint(), F_TRIMMED) == 0 then
        want = need + buf(36, 2):uint() + SEAL_TAG_LEN
    else
        what = "Trimmed sealed DATA"
    end
    if len ~= want then
        return malformed(tree, nil, string.format("%s is %d bytes, header says %d", what, len, want))
    end
    return true
end

-- dissect_sealed shows the security sublayer after the header of t.
local function dissect_sealed(buf, tree, t)
    local hl = header_len[t]
    local sub = tree:add(buf(hl), "Security sublayer")
    sub:add(f.tss_domain, buf(hl, SEAL_DOMAIN_LEN))
    sub:add(f.tss_nonce, buf(hl + SEAL_DOMAIN_LEN, SEAL_NONCE_LEN))
    sub:add(f.tss_header_tag, buf(hl + SEAL_DOMAIN_LEN + SEAL_NONCE_LEN, SEAL_TAG_LEN))
    local info = string.format(" SEALED domain=%d", buf(hl, SEAL_DOMAIN_LEN):uint())
    local body = buf:len() - hl - SEAL_EXT_LEN
    if t == TYPE_DATA and bit32.band(buf(1, 1):uint(), F_TRIMMED) == 0 then
        local n = body - SEAL_TAG_LEN
        local encrypted = sub:add(f.encrypted, true)
        encrypted:set_generated()
        if n > 0 then
            sub:add(f.tss_ciphertext, buf(hl + SEAL_EXT_LEN, n))
        end
        sub:add(f.tss_payload_tag, buf(hl + SEAL_EXT_LEN + n, SEAL_TAG_LEN))
        info = info .. " encrypted"
    end
    return info
end

-- check_length verifies that the datagram is as long as its type requires.
local function check_length(buf, tree, t)
    if sealed_bit ~= 0 then
        return check_sealed_length(buf, tree, t)
    end
    local need, len = header_len[t], buf:len()
    if len < need then
        return malformed(tree, nil, string.format("%s is %d bytes, need %d", type_names[t], len, need))
    end
    if t ~= TYPE_DATA and len > need then
        return malformed(tree, nil, string.format("%s is %d bytes, want %d", type_names[t], len, need))
    end
    return true
end

function forgive.dissector(buf, pinfo, root)
    pinfo.cols.protocol = "FORGIVE"
    local tree = root:add(forgive, buf())
    if buf:len() < 8 then
        malformed(tree, nil, "Shorter than the 8-byte common header")
        pinfo.cols.info = "FORGIVE (malformed)"
        return buf:len()
    end
    local version_item = tree:add(f.version, buf(0, 1))
    tree:add(f.type, buf(0, 1))
    local version = bit32.rshift(buf(0, 1):uint(), 4)
    local t = bit32.band(buf(0, 1):uint(), 0x0F)
    if version ~= VERSION then
        malformed(nil, version_item, "Unsupported version " .. version)
        pinfo.cols.info = "FORGIVE version " .. version
        return buf:len()
    end
    local dissect = dissectors[t]
    if dissect == nil then
        malformed(tree, nil, "Unknown packet type " .. t)
        pinfo.cols.info = "FORGIVE type " .. t
        return buf:len()
    end
    tree:append_text(", " .. type_names[t])
    sealed_bit = 0
    if t ~= TYPE_PAUSE and bit32.band(buf(1, 1):uint(), F_SEALED) ~= 0 then
        sealed_bit = F_SEALED
        tree:append_text(", sealed")
    end
    local sealed_item = tree:add(f.sealed, sealed_bit ~= 0)
    sealed_item:set_generated()
    if not check_length(buf, tree, t) then
        pinfo.cols.info = type_names[t] .. " (malformed)"
        return buf:len()
    end
    local info = dissect(buf, pinfo, tree, root)
    if sealed_bit ~= 0 then
        info = info .. dissect_sealed(buf, tree, t)
    end
    local hosts = string.format("%d -> %d ", buf(4, 2):uint(), buf(6, 2):uint())
    pinfo.cols.info = hosts .. info
    return buf:len()
end

DissectorTable.get("udp.port"):add(PORT, forgive)
