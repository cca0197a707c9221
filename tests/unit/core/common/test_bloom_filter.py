"""BloomFilter / BitsArray / Murmur3 against vectors computed with upstream's classes.

The vectors were printed by RocketMQ 5.5.0's org.apache.rocketmq.filter.util.BloomFilter and
Guava 31.1's Hashing.murmur3_128() (a throwaway Java program, not kept in the repo).
"""

import pytest

from orbitmq.common.filter.bloom import BloomFilter, BloomFilterData, murmur3_128_as_long

# Hashing.murmur3_128().hashString(s, UTF_8).asLong()
MURMUR = [
    ("", 0),
    ("a", -8839064797231613815),
    ("GroupA#TopicA", -8794353966826142199),
    ("CID_SQL#TopicTest", -9133735402591880069),
    ("消费组#主题", -8681975281059829809),
    ("%RETRY%G#%RETRY%G", 2037644357973530278),
    ("x" * 37, -5429081908302294693),  # two full 16-byte blocks and a 5-byte tail
]

# BloomFilter.createByFn(f, n): (f, n, k, m)
FN = [(20, 32, 3, 112), (20, 64, 3, 216), (10, 128, 4, 616), (1, 1, 7, 16), (99, 1000, 1, 24)]

# BloomFilter.createByFn(20, 32).generate(s).getBitPos()
POSITIONS = {
    "GroupA#TopicA": [29, 107, 11],
    "CID_SQL#TopicTest": [25, 65, 99],
    "消费组#主题": [101, 21, 111],
    "%RETRY%G#%RETRY%G": [106, 11, 28],
    "a": [94, 99, 7],
}


@pytest.mark.parametrize(("text", "expected"), MURMUR)
def test_murmur3_128_as_long(text, expected):
    assert murmur3_128_as_long(text) == expected


@pytest.mark.parametrize(("f", "n", "k", "m"), FN)
def test_k_and_m_from_error_rate_and_count(f, n, k, m):
    bf = BloomFilter.create_by_fn(f, n)
    assert (bf.k, bf.m) == (k, m)
    assert bf.m % 8 == 0


def test_defaults_give_112_bits():
    # BrokerConfig: expectConsumerNumUseFilter 32, maxErrorRateOfBloomFilter 20
    bf = BloomFilter(20, 32)
    assert bf.m == 112 and bf.byte_length == 14 and bf.k == 3


@pytest.mark.parametrize("text", sorted(POSITIONS))
def test_bit_positions(text):
    bf = BloomFilter(20, 32)
    data = bf.generate(text)
    assert data == BloomFilterData(POSITIONS[text], 112)
    assert bf.is_valid(data)


def test_hash_to_and_is_hit_as_bits_array():
    bf = BloomFilter(20, 32)
    bits = bytearray(bf.byte_length)
    bf.hash_to(bf.generate("GroupA#TopicA"), bits)
    bf.hash_to(bf.generate("CID_SQL#TopicTest"), bits)
    # BitsArray#bytes() after the same two hashTo calls (Java bytes are signed; all small here)
    assert list(bits) == [0, 8, 0, 34, 0, 0, 0, 0, 2, 0, 0, 0, 8, 8]
    hits = {text: bf.is_hit(bf.generate(text), bytes(bits)) for text in POSITIONS}
    assert hits == {"GroupA#TopicA": True, "CID_SQL#TopicTest": True, "消费组#主题": False,
                    "%RETRY%G#%RETRY%G": False, "a": False}


def test_invalid_arguments_and_foreign_data():
    for f, n in ((0, 1), (100, 1), (20, 0)):
        with pytest.raises(ValueError):
            BloomFilter(f, n)
    bf = BloomFilter(20, 32)
    other = BloomFilter(20, 64).generate("g#t")
    assert not bf.is_valid(other) and not bf.is_valid(None)
    with pytest.raises(ValueError):
        bf.is_hit(other, bytes(14))
    with pytest.raises(ValueError):
        bf.hash_to(bf.generate("g#t"), bytearray(13))


def test_bloom_data_json_round_trip():
    data = BloomFilter(20, 32).generate("g#t")
    assert BloomFilterData.from_json_dict(data.to_json_dict()) == data
    assert BloomFilterData.from_json_dict({"bitPos": "x", "bitNum": 1}) is None
