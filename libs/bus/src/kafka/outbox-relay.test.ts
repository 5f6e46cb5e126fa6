import { unconfirmedPartitions } from './outbox-relay.js';

const result = (partition: number, baseOffset: string) => ({
  topicName: 'ofp.things',
  partition,
  errorCode: 0,
  baseOffset,
  logAppendTime: '-1',
  logStartOffset: '0',
});

describe('the partitions of a send not known to be stored', () => {
  it('are none when every partition has an offset', () => {
    expect(unconfirmedPartitions([result(0, '0'), result(1, '41')])).toEqual([]);
  });

  it('are those acknowledged without one (librdkafka -1001), named topic[partition]', () => {
    expect(unconfirmedPartitions([result(0, '-1001'), result(1, '3')])).toEqual(['ofp.things[0]']);
  });
});
