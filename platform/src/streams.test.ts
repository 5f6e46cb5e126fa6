import { readFileSync } from 'node:fs';
import { platformStreamTypes } from './streams.js';

// The chart renders one KafkaTopic per stream from its own list (charts/ofp/templates/_helpers.tpl):
// a stream the platform gains must be provisioned too, or KAFKA_CREATE_TOPICS=false stops the services.
describe('the event streams', () => {
  it('are the ones the chart provisions as KafkaTopics', () => {
    const helpers = readFileSync(new URL('../../charts/ofp/templates/_helpers.tpl', import.meta.url), 'utf8');
    const chartList = /define "ofp\.streamTypes" -\}\}\n(.*)\n/.exec(helpers)?.[1]?.split(' ');
    expect(chartList).toEqual(platformStreamTypes());
  });
});
